"""Named hardware + model profiles of the simulated engine, loaded from ``autotune/sim/profiles/<name>.yaml``.

A profile is data: the GPU and interconnect, the model's shape, SGLang's defaults on that setup, launch-phase durations,
the drafters the story uses, and where each number comes from (``calibration``). ``docs/simulator.md`` explains the fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from autotune.core.errors import EngineError

PROFILE_DIR = Path(__file__).parent / "profiles"


class ProfileError(EngineError):
    """A simulator profile is missing or malformed. The message names the file, the key and the fix."""


@dataclass(frozen=True)
class Hardware:
    gpu_name: str
    gpu_count: int
    gpu_mem_gb: float  # per GPU
    mem_bw_gbps: float  # per GPU, GB/s (datasheet)
    mem_bw_efficiency: float  # achieved fraction of mem_bw_gbps when streaming weights
    tflops_bf16: float  # dense, per GPU
    compute_efficiency: float
    interconnect: str  # "pcie" or "nvlink"
    nccl_channel_bw_gbps: float  # NCCL's per-channel bus bandwidth (graph speedIntra)
    nccl_default_channels: int
    nccl_max_channels: int
    link_bw_gbps: float  # cap on the bus bandwidth, whatever the channel count
    nccl_call_overhead_us: float  # per collective, on top of NCCL's own latency model
    nccl_hw_lat_scale: float  # scales NCCL's per-hop latency table (its PCI figures date from PCIe Gen3)
    custom_ar_latency_us: float
    custom_ar_bw_gbps: float
    custom_ar_max_bytes: int
    cuda_context_gb: float  # per GPU, outside --mem-fraction-static: CUDA context, NCCL, allocator slack


@dataclass(frozen=True)
class ModelShape:
    name: str
    architecture: str  # "llama" or "deepseek_v3"
    num_layers: int
    hidden_size: int
    vocab_size: int
    context_len: int
    weight_gb: float  # all ranks together
    active_params_b: float  # parameters touched per token (billions)
    kv_bytes_per_token: int  # all layers, one replica; sharded over TP unless kv_replicated
    kv_replicated: bool = False  # MLA: every TP rank holds the whole latent cache
    expert_weight_gb: float = 0.0  # routed experts' share of weight_gb (MoE only)
    num_experts: int = 0
    experts_top_k: int = 0
    allreduces_per_layer: int = 2
    layer_floor_us: float = 50.0  # GPU time floor of one decoder layer at small batch (latency-bound kernels)
    per_seq_us: float = 10.0  # GPU time per running sequence per step (attention, sampling)
    step_fixed_us: float = 100.0  # per forward pass: embedding, lm_head, sampling setup
    eager_layer_us: float = 500.0  # per layer without CUDA graphs (CPU-bound kernel launches)
    prefill_token_us: float = 1.0  # extra per prefill token (attention, activation traffic)
    activation_gb_per_1k_tokens: float = 0.1  # per GPU, for the largest prefill chunk
    graph_mem_gb_per_bs: float = 0.01  # per GPU, per captured decode batch size unit
    dtype: str = "bfloat16"
    spec_defaults: tuple[int, int, int] = (3, 1, 4)  # (steps, topk, draft tokens) SGLang auto-chooses


@dataclass(frozen=True)
class Drafter:
    name: str
    kind: str  # "eagle3" or "eagle": which algorithm it was trained for
    paths: tuple[str, ...] = ()
    match_any: bool = False  # any --speculative-draft-model-path selects it (dummy drafters)
    accept_probs: tuple[float, ...] = ()  # per-position acceptance, chain (topk 1)
    accept_decay: float = 0.8  # for positions beyond accept_probs: p_i = p_last * decay^(i - n)
    topk_miss_ratio: float = 0.6  # each extra candidate at a depth multiplies the miss probability by this
    weight_gb: float = 1.0  # all ranks
    num_layers: int = 1
    layer_floor_us: float = 100.0
    step_fixed_us: float = 300.0  # per draft forward: lm_head, top-k, tree bookkeeping
    per_seq_us: float = 0.0  # per sequence per draft pass: sampling, top-k, tree building
    accept_token_us: float = 0.0  # per accepted draft token per sequence: verify bookkeeping, draft extend (fitted)
    load_s: float = 5.0
    note: str = ""


@dataclass(frozen=True)
class EngineDefaults:
    version: str = "0.5.17"
    mem_fraction_static: float = 0.88
    cuda_graph_max_bs: int = 256
    chunked_prefill_size: int = 8192
    max_prefill_tokens: int = 16384
    attention_backend: str = "triton"
    new_token_ratio: float = 0.5  # share of max_new_tokens reserved in the KV cache per running request
    prefill_graph_off_decode_factor: float = 1.0  # decode slowdown with --disable-prefill-cuda-graph (0.5.17: measured)
    default_max_running_requests_cap: int = 4096  # req_to_token pool size bound on the unset limit


@dataclass(frozen=True)
class LaunchTimes:
    import_s: float = 45.0  # python imports of the main and scheduler processes
    dist_init_s: float = 1.0
    custom_ar_init_s: float = 0.0  # extra at TP > 1 with custom all-reduce
    weight_load_s: float = 1.0
    kv_alloc_s: float = 3.0
    graph_capture_base_s: float = 1.0
    graph_capture_per_bs_s: float = 0.1  # per captured batch size
    prefill_graph_s: float = 6.0  # breakable prefill graph capture (0.5.17 default)
    torch_compile_s: float = 60.0
    warmup_s: float = 3.0


@dataclass(frozen=True)
class Calibration:
    quantity: str
    value: str
    source: str


@dataclass(frozen=True)
class NgramModel:
    accept_probs: tuple[float, ...] = (0.3, 0.2, 0.15)
    accept_decay: float = 0.7
    cpu_us_per_seq: float = 30.0  # trie lookup per sequence per step


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    hardware: Hardware
    model: ModelShape
    defaults: EngineDefaults
    launch: LaunchTimes
    drafters: tuple[Drafter, ...] = ()
    ngram: NgramModel = field(default_factory=NgramModel)
    calibration: tuple[Calibration, ...] = ()
    notes: tuple[str, ...] = ()

    def drafter_for(self, path: str | None) -> Drafter | None:
        """The drafter a ``--speculative-draft-model-path`` selects: by name, listed path, or the path's last part."""
        if path is None:
            return next((d for d in self.drafters if d.match_any), None)
        tail = path.rstrip("/").rsplit("/", 1)[-1]
        for d in self.drafters:
            if path == d.name or tail == d.name or path in d.paths or tail in d.paths:
                return d
        return next((d for d in self.drafters if d.match_any), None)


def list_profiles() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def profile_gpus(name_or_path: str) -> int | None:
    """The GPUs a profile's node has; None for a profile that cannot be read (the server reports it at launch)."""
    try:
        return int(load_profile(name_or_path).hardware.gpu_count)
    except Exception:  # noqa: BLE001 - a bad profile is reported with the engine's own message at launch
        return None


def load_profile(name_or_path: str) -> Profile:
    """Load a profile by name (``kimi-k2.5-int4-8x-rtxpro6000``) or by path to a YAML file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = PROFILE_DIR / f"{name_or_path}.yaml"
    if not path.exists():
        raise ProfileError(f"unknown sim profile {name_or_path!r}: use one of {', '.join(list_profiles())}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML ({exc}); fix the file") from exc
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: expected a mapping at the top level")
    return _profile_from_dict(data, path)


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ProfileError(f"{where}: expected a mapping")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ProfileError(f"{where}: {exc}; add the missing key") from exc


def _profile_from_dict(data: dict[str, Any], path: Path) -> Profile:
    top = {
        "name",
        "description",
        "hardware",
        "model",
        "defaults",
        "launch",
        "drafters",
        "ngram",
        "calibration",
        "notes",
    }
    unknown = sorted(set(data) - top)
    if unknown:
        raise ProfileError(f"{path}: unknown top-level key(s) {unknown}; known: {sorted(top)}")
    for key in ("name", "hardware", "model"):
        if key not in data:
            raise ProfileError(f"{path}: missing required key {key!r}")
    drafters = tuple(
        _build(Drafter, {"name": name, **(body or {})}, f"{path}: drafters.{name}")
        for name, body in (data.get("drafters") or {}).items()
    )
    calibration = tuple(_build(Calibration, c, f"{path}: calibration") for c in data.get("calibration") or ())
    return Profile(
        name=str(data["name"]),
        description=str(data.get("description", "")),
        hardware=_build(Hardware, data["hardware"], f"{path}: hardware"),
        model=_build(ModelShape, data["model"], f"{path}: model"),
        defaults=_build(EngineDefaults, data.get("defaults") or {}, f"{path}: defaults"),
        launch=_build(LaunchTimes, data.get("launch") or {}, f"{path}: launch"),
        drafters=drafters,
        ngram=_build(NgramModel, data.get("ngram") or {}, f"{path}: ngram"),
        calibration=calibration,
        notes=tuple(str(n) for n in data.get("notes") or ()),
    )
