"""Resolve flags + environment + profile into what the simulated server runs, as SGLang would. Pure.

Memory (per GPU, GB): weights and drafter weights and the KV pool live in ``gpu_mem * mem_fraction_static``; the rest
must hold the CUDA context, NCCL buffers, prefill activations and CUDA-graph memory. Too little static memory leaves no
KV room (SGLang: ``Not enough memory``); too little of the rest fails CUDA-graph capture (``Capture cuda graph failed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from autotune.engines.sglang_facts import EAGLE_FAMILY, SPEC_DEFAULT_MAX_RUNNING_REQUESTS, simulated_accept_overflows
from autotune.sim.args import ServerArgs
from autotune.sim.model import ModelKnobs, PerfModel, graph_batch_sizes, kv_bytes_per_token
from autotune.sim.nccl import NcclConfigError, NcclSettings, custom_ar_supported, nccl_buffer_gb, parse_nccl_env
from autotune.sim.profile import Profile
from autotune.sim.spec import SpecConfig, SpecError, resolve_spec

CAPTURE_HINT = (
    "Possible solutions:",
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)",
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. (Not recommended. Huge performance loss)",
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose ",
)


class ArgsFailure(Exception):
    """The server refuses its arguments before loading anything. ``lines`` are the error tail to print."""

    def __init__(self, lines: tuple[str, ...]) -> None:
        super().__init__(lines[-1] if lines else "invalid arguments")
        self.lines = lines


@dataclass(frozen=True)
class LaunchFailure:
    phase: str  # "load", "kv", "capture" or "warmup": where the launch stops
    lines: tuple[str, ...]


@dataclass(frozen=True)
class LaunchPlan:
    """Simulated seconds of each launch phase."""

    import_s: float
    dist_init_s: float
    weight_load_s: float
    draft_load_s: float
    kv_alloc_s: float
    graph_capture_s: float
    warmup_s: float

    @property
    def total_s(self) -> float:
        return (
            self.import_s
            + self.dist_init_s
            + self.weight_load_s
            + self.draft_load_s
            + self.kv_alloc_s
            + self.graph_capture_s
            + self.warmup_s
        )


@dataclass(frozen=True)
class SimConfig:
    args: ServerArgs
    profile: Profile
    knobs: ModelKnobs
    spec: SpecConfig | None
    dp: int
    mem_fraction_static: float
    kv_tokens: int  # max_total_num_tokens, per DP replica
    max_running_requests: int  # per DP replica
    chunked_prefill_size: int  # <= 0: no chunking
    max_prefill_tokens: int
    context_len: int
    graph_bs: tuple[int, ...]
    weights_gb: float  # per GPU, target + drafter
    kv_gb: float  # per GPU
    avail_after_static_gb: float
    nonstatic_need_gb: float
    launch: LaunchPlan
    failure: LaunchFailure | None
    warnings: tuple[str, ...]

    def perf_model(self) -> PerfModel:
        return PerfModel(self.profile, self.knobs)


def resolve(args: ServerArgs, profile: Profile, env: Mapping[str, str]) -> SimConfig:
    """Resolve like SGLang. Raises ArgsFailure for errors SGLang reports before loading weights."""
    hw, m, d = profile.hardware, profile.model, profile.defaults
    tp, dp = args.tp_size, args.dp_size
    if tp < 1 or dp < 1:
        raise ArgsFailure(("ValueError: --tp-size and --dp-size must be >= 1",))
    if args.pp_size < 1:
        raise ArgsFailure(("ValueError: --pp-size must be >= 1",))
    gpus = args.gpus
    nnodes = max(1, args.nnodes)
    if nnodes > 1 and gpus % nnodes:
        raise ArgsFailure((f"ValueError: the server's {gpus} GPUs are not divisible by --nnodes {nnodes}",))
    if not 0 <= args.node_rank < nnodes:
        raise ArgsFailure((f"ValueError: --node-rank {args.node_rank} is outside 0..{nnodes - 1} (--nnodes {nnodes})",))
    if nnodes > 1 and not args.dist_init_addr:
        raise ArgsFailure(("ValueError: --dist-init-addr is required when --nnodes > 1",))
    if gpus // nnodes > hw.gpu_count:  # the GPUs of one node (the profile's hardware is one node)
        raise ArgsFailure(
            (
                f"RuntimeError: CUDA error: invalid device ordinal ({gpus} GPUs requested over "
                f"{nnodes} node(s), profile {profile.name} has {hw.gpu_count} per node)",
            )
        )
    not_modelled = [f"--pp-size {args.pp_size}"] if args.pp_size > 1 else []
    if args.dp_attention and (args.attn_dp_size or dp) > 1:
        not_modelled.append("DP attention (--enable-dp-attention / --attn-dp-size)")
    if not_modelled:
        raise ArgsFailure(
            (
                f"NotImplementedError: the simulated engine (autotune.sim) does not model {' or '.join(not_modelled)}; "
                "run this configuration on SGLang, or leave it out of a simulated study",
            )
        )
    frac = args.mem_fraction_static if args.mem_fraction_static is not None else d.mem_fraction_static
    if not 0.0 < frac < 1.0:
        raise ArgsFailure((f"ValueError: --mem-fraction-static must be in (0, 1), got {frac}",))
    try:
        spec = resolve_spec(args, profile, env)
    except SpecError as exc:
        raise ArgsFailure((str(exc),)) from exc
    warnings: list[str] = list(spec.warnings) if spec else []
    nccl_error: str | None = None
    try:
        nccl = parse_nccl_env(env)
    except NcclConfigError as exc:
        nccl, nccl_error = NcclSettings(), str(exc)
    custom_ar = tp > 1 and not args.disable_custom_all_reduce and custom_ar_supported(hw, tp)
    if tp > 1 and not args.disable_custom_all_reduce and not custom_ar:
        warnings.append("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.")

    # ---- memory --------------------------------------------------------------------------------------------------
    drafter_gb = spec.drafter.weight_gb / tp if spec and spec.drafter else 0.0
    weights = m.weight_gb / tp + drafter_gb
    kv_tok = kv_bytes_per_token(profile, tp, args.kv_cache_dtype)
    if spec and spec.drafter:
        kv_tok *= 1.0 + spec.drafter.num_layers / m.num_layers
    static = hw.gpu_mem_gb * frac
    kv_gb = static - weights
    tokens = int(kv_gb * 1e9 / kv_tok) if kv_gb > 0 else 0
    tokens = tokens // args.page_size * args.page_size
    if args.max_total_tokens is not None:
        tokens = min(tokens, args.max_total_tokens)
    context_len = args.context_length or m.context_len
    if args.max_running_requests is not None:
        mrr = max(1, args.max_running_requests // dp)
    elif spec is not None:
        mrr = SPEC_DEFAULT_MAX_RUNNING_REQUESTS
        warnings.append(f"max_running_requests is set to {mrr} for speculative decoding (pass --max-running-requests)")
    else:
        pool = min(max(int(tokens / max(context_len, 1) * 512), 2048), d.default_max_running_requests_cap)
        mrr = max(1, min(tokens // 2, pool))
    graphs_off = args.cuda_graph_disabled
    graph_max = 0 if graphs_off else min(args.cuda_graph_max_bs or d.cuda_graph_max_bs, mrr)
    graph_bs = graph_batch_sizes(graph_max, spec is not None)
    chunk = args.chunked_prefill_size if args.chunked_prefill_size is not None else d.chunked_prefill_size
    act_tokens = max(chunk if chunk > 0 else args.max_prefill_tokens, 1)
    need = (
        hw.cuda_context_gb
        + (nccl_buffer_gb(hw, nccl) if tp > 1 else 0.0)
        + m.activation_gb_per_1k_tokens * act_tokens / 1000.0
        + m_graph(profile, graph_max, spec)
    )
    avail = hw.gpu_mem_gb * (1.0 - frac)

    knobs = ModelKnobs(
        tp=tp,
        custom_ar=custom_ar,
        nccl=nccl,
        graph_max_bs=graph_max,
        attention_backend=args.attention_backend or d.attention_backend,
        kv_cache_dtype=args.kv_cache_dtype,
        torch_compile=args.enable_torch_compile,
        torch_compile_max_bs=args.torch_compile_max_bs,
        prefill_graph=not args.disable_prefill_cuda_graph and not graphs_off,
        overlap_schedule=not args.disable_overlap_schedule,
        spec=spec,
    )
    launch = _launch_plan(args, profile, spec, tp, custom_ar, graph_bs, weights)
    failure = _failure(args, profile, spec, tp, weights, tokens, need, avail, graph_max, nccl, nccl_error)
    return SimConfig(
        args=args,
        profile=profile,
        knobs=knobs,
        spec=spec,
        dp=dp,
        mem_fraction_static=frac,
        kv_tokens=max(tokens, 0),
        max_running_requests=mrr,
        chunked_prefill_size=chunk,
        max_prefill_tokens=args.max_prefill_tokens,
        context_len=context_len,
        graph_bs=graph_bs,
        weights_gb=weights,
        kv_gb=max(kv_gb, 0.0),
        avail_after_static_gb=avail,
        nonstatic_need_gb=need,
        launch=launch,
        failure=failure,
        warnings=tuple(warnings),
    )


def _launch_plan(
    args: ServerArgs,
    profile: Profile,
    spec: SpecConfig | None,
    tp: int,
    custom_ar: bool,
    graph_bs: tuple[int, ...],
    weights_gb: float,
) -> LaunchPlan:
    lt = profile.launch
    dummy = args.load_format == "dummy"
    weight_s = 0.3 + weights_gb / 100.0 if dummy else lt.weight_load_s
    draft_s = 0.0
    if spec is not None and spec.drafter is not None:
        draft_dummy = dummy and args.speculative_draft_load_format in (None, "dummy")
        draft_s = 0.2 if draft_dummy else spec.drafter.load_s
    graphs = 0.0
    if graph_bs:
        per_set = 3 if spec is not None and spec.algorithm in EAGLE_FAMILY else (2 if spec is not None else 1)
        graphs = lt.graph_capture_base_s + lt.graph_capture_per_bs_s * len(graph_bs) * per_set
        if not args.disable_prefill_cuda_graph:
            graphs += lt.prefill_graph_s
        if args.enable_torch_compile:
            graphs += lt.torch_compile_s
    return LaunchPlan(
        import_s=lt.import_s,
        dist_init_s=lt.dist_init_s + (lt.custom_ar_init_s if custom_ar else 0.0),
        weight_load_s=weight_s,
        draft_load_s=draft_s,
        kv_alloc_s=lt.kv_alloc_s,
        graph_capture_s=graphs,
        warmup_s=0.0 if args.skip_server_warmup else lt.warmup_s,
    )


def m_graph(profile: Profile, graph_max: int, spec: SpecConfig | None) -> float:
    """GB of CUDA-graph memory for decode batches up to ``graph_max`` (verify graphs hold draft tokens + 1 per request)."""
    per_bs = spec.num_draft_tokens + 1 if spec else 1
    return profile.model.graph_mem_gb_per_bs * graph_max * per_bs


def _failure(
    args: ServerArgs,
    profile: Profile,
    spec: SpecConfig | None,
    tp: int,
    weights: float,
    tokens: int,
    need: float,
    avail: float,
    graph_max: int,
    nccl: NcclSettings,
    nccl_error: str | None,
) -> LaunchFailure | None:
    hw = profile.hardware
    if weights > hw.gpu_mem_gb - hw.cuda_context_gb:
        return LaunchFailure(
            "load",
            (
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {min(weights, 2.0):.2f} GiB. "
                f"GPU 0 has a total capacity of {hw.gpu_mem_gb / 1.073741824:.2f} GiB; the weights need "
                f"{weights:.2f} GB per GPU at tp_size={tp}.",
            ),
        )
    if tokens <= 0:
        # SGLang 0.5.17's text (kv_cache_configurator.py), seen on the H200; older releases say "Not enough memory".
        minimum = weights / (hw.gpu_mem_gb - hw.cuda_context_gb)  # SGLang: 1 - available / pre-load memory
        return LaunchFailure(
            "kv",
            (
                f"ValueError: Loaded weights leave no GPU memory for the KV cache under "
                f"--mem-fraction-static={args.mem_fraction_static}. Raise --mem-fraction-static above {minimum:.3f}.",
            ),
        )
    nccl_broken = tp > 1 and (nccl_error is not None or nccl.global_algo_breaks_allgather)
    if nccl_broken:
        algo = nccl.algo_env or "?"
        proto = nccl.proto_env or "(default)"
        warn = (
            f"NCCL WARN Error : no algorithm/protocol available for function AllGather with datatype ncclInt8. "
            f"NCCL_ALGO was set to {algo}. NCCL_PROTO was set to {proto}."
            if nccl_error is None
            else f"NCCL WARN {nccl_error}"
        )
        err = "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)"
        if graph_max > 0:
            return LaunchFailure(
                "capture",
                (
                    warn,
                    err,
                    "Exception: Capture cuda graph failed: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)",
                )
                + CAPTURE_HINT,
            )
        return LaunchFailure("warmup", (warn, err))
    if (
        spec is not None
        and spec.fixed_accept_length is not None
        and spec.algorithm in EAGLE_FAMILY
        and simulated_accept_overflows(spec.num_steps, spec.num_draft_tokens)
    ):
        return LaunchFailure(
            "warmup",
            (
                f"RuntimeError: The expanded size of the tensor ({spec.num_draft_tokens}) must match the existing size "
                f"({spec.num_steps + 1}) at non-singleton dimension 1. Target sizes: [-1, {spec.num_draft_tokens}]. "
                f"(SGLANG_SIMULATE_ACC_LEN draws accept lengths up to steps + 1 = {spec.num_steps + 1})",
            ),
        )
    if need > avail:
        free_mib = max(avail - (need - m_graph(profile, graph_max, spec)), 0.0) * 1024 / 1.073741824
        oom = (
            f"CUDA out of memory. Tried to allocate {need - avail + 0.25:.2f} GiB. GPU 0 has a total capacity of "
            f"{hw.gpu_mem_gb / 1.073741824:.2f} GiB of which {free_mib:.2f} MiB is free."
        )
        if graph_max > 0:
            return LaunchFailure("capture", (f"Exception: Capture cuda graph failed: {oom}",) + CAPTURE_HINT)
        return LaunchFailure("warmup", (f"torch.OutOfMemoryError: {oom}",))
    return None
