"""Will a point's server fit in GPU memory? A prediction before the launch, from sizes and flags (pure arithmetic).

SGLang's memory plan, per GPU (``docs/search.md`` has the evidence behind it):

- ``--mem-fraction-static`` of the GPU's memory holds the weights (target + drafter, split over tensor parallel) and
  the KV cache. When the weights leave no room for the cache the launch fails: out of memory at launch
  (0.5.17: "Loaded weights leave no GPU memory for the KV cache").
- The rest holds the CUDA context, NCCL buffers, prefill activations and the CUDA graphs of every decode batch size up
  to ``min(--cuda-graph-max-bs-decode, running cap)`` (a verify graph holds draft tokens + 1 tokens a request). When it
  cannot, CUDA-graph capture fails. This check needs per-model activation and graph constants, known for simulator
  profiles only; for a real model directory only the static check is made.

Sizes come from a simulator profile (``from_profile``), or from a model directory's ``config.json`` (parameters x
dtype bytes, KV bytes per token from the attention shape; ``from_model_dir``). A prediction that a launch proves wrong
is reported by ``check`` so the study's log says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.engines import sglang_rules
from autotune.trial.records import FailureKind

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


@dataclass(frozen=True)
class Prediction:
    fits: bool
    failure: FailureKind | None  # OOM_AT_LAUNCH or GRAPH_CAPTURE_FAILED when it does not fit
    reason: str
    kv_tokens: int | None = None  # the KV cache the launch would allocate (None when unknown)

    def as_attr(self) -> str:
        return "fits" if self.fits else f"{self.failure.value if self.failure else 'unknown'}: {self.reason}"


def _num(flags: Mapping[str, Any], name: str) -> float | None:
    v = flags.get(name)
    if v is None or v is False or v is True:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def predict(sizes: Sizes, flags: Mapping[str, Any], *, tp_size: int) -> Prediction:
    """Whether a server launched with ``flags`` (keyed without dashes, as ``TrialConfig.flags``) fits."""
    frac = _num(flags, "mem-fraction-static") or sizes.default_mem_fraction
    if frac is None:
        return Prediction(True, None, "mem-fraction-static is SGLang's own choice here; not predicted")
    tp = max(int(tp_size), 1)
    algo = sglang_rules.algorithm(flags)
    drafter = sizes.drafter(flags.get(sglang_rules.DRAFT_MODEL)) if algo else None
    weights = sizes.weight_bytes / tp + (drafter[0] / tp if drafter else 0.0)
    static = sizes.gpu_mem_bytes * frac
    kv_bytes = static - weights - sizes.preload_bytes
    per_token = sizes.kv_bytes_per_token / (1 if sizes.kv_replicated else tp)
    if drafter and sizes.num_layers:
        per_token *= 1.0 + drafter[1] / sizes.num_layers
    if kv_bytes <= 0:
        return Prediction(
            False,
            FailureKind.OOM_AT_LAUNCH,
            f"--mem-fraction-static {frac:g} gives {static / GIB:.2f} GiB per GPU for weights and KV cache; the weights "
            f"alone need {weights / GIB:.2f} GiB (+{sizes.preload_bytes / GIB:.1f} GiB already in use): no KV cache",
            0,
        )
    tokens = int(kv_bytes / per_token) if per_token > 0 else None
    if sizes.graph_bytes_per_bs > 0 and flags.get("disable-cuda-graph") in (None, False):
        mrr = sglang_rules.effective_max_running_requests(flags)
        graph_max = int(
            _num(flags, "cuda-graph-max-bs-decode")
            or _num(flags, "cuda-graph-max-bs")
            or sizes.default_graph_max_bs
            or 0
        )
        if mrr is not None:
            graph_max = min(graph_max, mrr)
        per_bs = (int(_num(flags, sglang_rules.DRAFT_TOKENS) or 0) + 1) if algo else 1
        chunk = _num(flags, "chunked-prefill-size") or sizes.default_chunked_prefill
        need = (
            sizes.context_bytes
            + (sizes.comm_bytes if tp > 1 else 0.0)
            + sizes.activation_bytes_per_token * max(chunk, 1)
            + sizes.graph_bytes_per_bs * graph_max * per_bs
        )
        avail = sizes.gpu_mem_bytes * (1.0 - frac)
        if need > avail:
            return Prediction(
                False,
                FailureKind.GRAPH_CAPTURE_FAILED,
                f"outside the static pool {avail / GIB:.2f} GiB are left for the CUDA context, activations and CUDA "
                f"graphs up to batch {graph_max} ({per_bs} token(s) a request), which need {need / GIB:.2f} GiB",
                tokens,
            )
    return Prediction(True, None, "fits", tokens)


def check(prediction: Prediction, failure: FailureKind | None, launched_ok: bool) -> str | None:
    """A sentence when a launch contradicts the prediction, else None."""
    memory = (FailureKind.OOM_AT_LAUNCH, FailureKind.GRAPH_CAPTURE_FAILED)
    if prediction.fits and failure in memory:
        return f"predicted to fit, but the launch failed ({failure.value if failure else ''})"
    if not prediction.fits and launched_ok:
        return f"predicted not to fit ({prediction.reason}), but it launched"
    return None


# ------------------------------------------------------------------------------------------------ sources of sizes


def from_profile(profile: Any) -> Sizes:
    """Sizes from a simulator profile (``autotune.sim.profile.Profile``); the simulator counts GB as 1e9 bytes."""
    from autotune.sim.nccl import NcclSettings, nccl_buffer_gb

    hw, m, d = profile.hardware, profile.model, profile.defaults
    drafters: dict[str, tuple[float, int]] = {}
    for dr in profile.drafters:
        for key in (dr.name, *dr.paths):
            drafters[key] = (dr.weight_gb * GB, dr.num_layers)
    return Sizes(
        gpu_mem_bytes=hw.gpu_mem_gb * GB,
        weight_bytes=m.weight_gb * GB,
        kv_bytes_per_token=float(m.kv_bytes_per_token),
        num_layers=m.num_layers,
        kv_replicated=m.kv_replicated,
        drafters=drafters,
        preload_bytes=0.0,
        context_bytes=hw.cuda_context_gb * GB,
        comm_bytes=nccl_buffer_gb(hw, NcclSettings()) * GB,
        activation_bytes_per_token=m.activation_gb_per_1k_tokens * GB / 1000.0,
        graph_bytes_per_bs=m.graph_mem_gb_per_bs * GB,
        default_mem_fraction=d.mem_fraction_static,
        default_graph_max_bs=d.cuda_graph_max_bs,
        default_chunked_prefill=d.chunked_prefill_size,
        source=f"sim profile {profile.name}",
    )


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
    return n * DTYPE_BYTES.get(dtype, 2)


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
        drafters=dr,
        source=f"config.json of {model}",
    )
