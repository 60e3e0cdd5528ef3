"""What a model takes in GPU memory, read before a launch: the sizes ``autotune.policy.fit`` predicts from.

An engine says where its sizes come from (``Engine.memory_sizes``): a model directory's ``config.json`` (parameters x
dtype bytes, KV bytes per token from the attention shape; ``from_model_dir``), or a simulator profile. Pure data and
arithmetic; the flags that decide how the memory is split are read by the engine's model (``base.EngineModel``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError

GB = 1e9
GIB = 1024**3
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "fp8": 1, "float8_e4m3fn": 1, "int8": 1, "int4": 0.5}
# Memory SGLang's KV-cache arithmetic counts as in use besides the weights (CUDA context, torch): measured on the H200
# from the KV cache SGLang 0.5.17 allocated for Llama-8B at TP 1 at four fractions (results/evidence/
# h200-tp1-oom-boundary: a constant 3,250 tokens of 128 KiB above the arithmetic with 0.7 GiB, i.e. 0.30 GiB)
PRELOAD_GIB = 0.3


class FitError(AutotuneError):
    """A model's sizes could not be read (no config.json, an architecture without a size rule)."""


@dataclass(frozen=True)
class Sizes:
    """Bytes that decide whether a launch fits. ``graph_*`` and ``activation_*`` are 0 where unknown."""

    gpu_mem_bytes: float  # per GPU, as the runtime reports its total
    weight_bytes: float  # the target model, all ranks together
    kv_bytes_per_token: float  # all layers of the target, one copy of the cache
    num_layers: int
    kv_replicated: bool = False  # MLA: every TP rank holds the whole latent cache
    kv_heads: int = 0  # the target's KV heads (a rank holds max(1, kv_heads // tp) of them); 0: split evenly over TP
    drafters: Mapping[str, tuple[float, int]] = field(default_factory=dict)  # path or name -> (bytes, layers)
    preload_bytes: float = PRELOAD_GIB * GIB  # used before the weights load
    context_bytes: float = 0.0  # outside the static pool: CUDA context, allocator slack
    comm_bytes: float = 0.0  # outside the static pool at tensor parallel > 1: NCCL's buffers (default settings)
    activation_bytes_per_token: float = 0.0  # per GPU, for the largest prefill chunk
    graph_bytes_per_bs: float = 0.0  # per GPU, per captured decode batch-size unit
    default_mem_fraction: float | None = None
    default_graph_max_bs: int | None = None
    default_chunked_prefill: int = 8192
    source: str = ""

    def drafter(self, path: Any) -> tuple[float, int] | None:
        if path is None or path is False:
            return None
        text = str(path)
        tail = text.rstrip("/").rsplit("/", 1)[-1]
        return self.drafters.get(text) or self.drafters.get(tail)


def read_config(path: str | Path) -> dict[str, Any]:
    """``config.json`` of a model directory, or of the dummy shape named like its last part (``/tmp/models/llama-1b``)."""
    p = Path(path)
    cfg = p / "config.json"
    if cfg.is_file():
        try:
            return dict(json.loads(cfg.read_text()))
        except (OSError, ValueError) as exc:
            raise FitError(f"{cfg}: could not read the model config ({exc}); fix or remove the file") from exc
    from autotune.models.shapes import SHAPES, resolved_config

    if p.name in SHAPES:
        return resolved_config(p.name)
    raise FitError(f"{p}: no config.json there, and {p.name!r} is not a known dummy shape; the sizes are unknown")


def model_bytes(config: Mapping[str, Any]) -> float:
    from autotune.models.shapes import ModelShapeError, param_count

    try:
        n = param_count(config)
    except (ModelShapeError, KeyError) as exc:
        raise FitError(f"no size rule for architecture {config.get('architectures')!r} ({exc})") from exc
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return n * (_quantized_bytes(config) or DTYPE_BYTES.get(dtype, 2))


def _quantized_bytes(config: Mapping[str, Any]) -> float | None:
    """Bytes a weight takes in a quantized checkpoint, whose ``torch_dtype`` names the unquantized layers' type
    (DeepSeek-V3's FP8 release says bfloat16): ``quant_method: fp8`` 1, AWQ / GPTQ ``bits: 4`` 0.5, compressed-tensors
    its first group's weight ``num_bits``, ModelOpt FP8 1 and NVFP4 4.5 bits, MXFP4 4.25 bits (a scale per 16 or 32
    values); None otherwise."""
    q = config.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":
        return 1.0
    if method == "mxfp4":
        return 4.25 / 8
    if method == "modelopt":
        return {"FP8": 1.0, "NVFP4": 4.5 / 8}.get(str(q.get("quant_algo", "")).upper())
    bits = q.get("bits")
    if method == "compressed-tensors":
        groups = q.get("config_groups")
        first = next(iter(groups.values()), None) if isinstance(groups, Mapping) and groups else None
        weights = first.get("weights") if isinstance(first, Mapping) else None
        bits = weights.get("num_bits") if isinstance(weights, Mapping) else None
    return bits / 8 if isinstance(bits, int) and not isinstance(bits, bool) and 0 < bits < 16 else None


def kv_bytes_per_token(config: Mapping[str, Any]) -> tuple[float, bool]:
    """KV-cache bytes per token over all layers (bf16), and whether every TP rank holds all of it (MLA)."""
    layers = int(config["num_hidden_layers"])
    if "kv_lora_rank" in config:
        return float((config["kv_lora_rank"] + config["qk_rope_head_dim"]) * layers * 2), True
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or config["hidden_size"] // heads)
    return float(2 * kv_heads * head_dim * layers * 2), False


def from_model_dir(model: str | Path, gpu_mem_bytes: float, *, drafters: tuple[str, ...] = ()) -> Sizes:
    """Sizes from config.json files (target and drafters). CUDA-graph memory is not predicted from them."""
    cfg = read_config(model)
    kv, replicated = kv_bytes_per_token(cfg)
    kv_heads = 0 if replicated else int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"])
    dr: dict[str, tuple[float, int]] = {}
    for path in drafters:
        dcfg = read_config(path)
        dr[str(path)] = (model_bytes(dcfg), int(dcfg.get("num_hidden_layers", 1)))
    return Sizes(
        gpu_mem_bytes=gpu_mem_bytes,
        weight_bytes=model_bytes(cfg),
        kv_bytes_per_token=kv,
        num_layers=int(cfg["num_hidden_layers"]),
        kv_replicated=replicated,
        kv_heads=kv_heads,
        drafters=dr,
        source=f"config.json of {model}",
    )
