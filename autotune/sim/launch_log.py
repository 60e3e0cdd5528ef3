"""The launch sequence of the simulated server: SGLang-shaped log lines, phase durations in SIMULATED seconds.

The process sleeps each phase's simulated duration divided by the launch speedup, so a 6-minute launch takes about a
second or two of wall time while the log (and ``/server_info``'s ``sim.launch_time_s``) still say 6 minutes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import sys
import time

from autotune.sim.config import LaunchFailure, SimConfig

DEFAULT_LAUNCH_WALL_S = 1.5


class Logger:
    """Writes ``[YYYY-mm-dd HH:MM:SS] message`` lines to stdout, stamped with simulated time."""

    def __init__(self, start_epoch: float | None = None) -> None:
        self.start_epoch = time.time() if start_epoch is None else start_epoch
        self.sim_offset = 0.0  # simulated seconds elapsed since start (launch phases)
        self.time_scale = 1.0
        self._wall0 = time.monotonic()
        self.serving = False

    def stamp(self) -> str:
        if self.serving:
            t = self.start_epoch + self.sim_offset + (time.monotonic() - self._wall0) * self.time_scale
        else:
            t = self.start_epoch + self.sim_offset
        return dt.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M:%S")

    def __call__(self, msg: str, rank: str = "") -> None:
        tag = f" {rank}" if rank else ""
        sys.stdout.write(f"[{self.stamp()}{tag}] {msg}\n")
        sys.stdout.flush()

    def start_serving(self, time_scale: float) -> None:
        self.time_scale = time_scale
        self._wall0 = time.monotonic()
        self.serving = True


def speedup_for(cfg: SimConfig, requested: float | None) -> float:
    if requested is not None:
        return max(requested, 1e-6)
    return max(1.0, cfg.launch.total_s / DEFAULT_LAUNCH_WALL_S)


async def run_launch(cfg: SimConfig, log: Logger, speedup: float) -> LaunchFailure | None:
    """Print the launch phases, sleeping each one scaled down; stop at the configured failure, if any."""
    plan, args, prof = cfg.launch, cfg.args, cfg.profile
    hw, m = prof.hardware, prof.model
    failure = cfg.failure
    tp0 = "TP0" if cfg.knobs.tp > 1 or cfg.dp > 1 else ""

    async def phase(seconds: float) -> None:
        log.sim_offset += seconds
        await asyncio.sleep(seconds / speedup)

    log(
        f"server_args=ServerArgs(model_path='{args.model_path}', tp_size={args.tp_size}, dp_size={args.dp_size}, "
        f"mem_fraction_static={cfg.mem_fraction_static}, max_running_requests={args.max_running_requests}, "
        f"chunked_prefill_size={cfg.chunked_prefill_size}, speculative_algorithm={args.speculative_algorithm}, "
        f"host='{args.host}', port={args.port}, ...)"
    )
    log(
        f"SIMULATED engine (autotune.sim): profile={prof.name}, hardware={hw.gpu_count}x {hw.gpu_name}, "
        f"time_scale={args.sim_time_scale:g}. Results from this server are simulated, never measurements."
    )
    for w in cfg.warnings:
        log(f"WARNING {w}")
    await phase(plan.import_s)
    log("Init torch distributed begin.", tp0)
    await phase(plan.dist_init_s)
    log(
        f"Init torch distributed ends. elapsed={plan.dist_init_s:.2f} s, mem usage={hw.cuda_context_gb / 3:.2f} GB", tp0
    )
    free = hw.gpu_mem_gb - hw.cuda_context_gb
    target_gb = m.weight_gb / cfg.knobs.tp
    log(f"Load weight begin. avail mem={free:.2f} GB", tp0)
    if failure is not None and failure.phase == "load":
        await phase(plan.weight_load_s * 0.5)
        return failure
    await phase(plan.weight_load_s)
    free -= target_gb
    log(
        f"Load weight end. elapsed={plan.weight_load_s:.2f} s, type={_arch_name(m.architecture)}, "
        f"dtype=torch.{m.dtype}, avail mem={free:.2f} GB, mem usage={target_gb:.2f} GB.",
        tp0,
    )
    if cfg.spec is not None and cfg.spec.drafter is not None:
        draft_gb = cfg.spec.drafter.weight_gb / cfg.knobs.tp
        log(f"Load weight begin. avail mem={free:.2f} GB", tp0)
        await phase(plan.draft_load_s)
        free -= draft_gb
        log(
            f"Load weight end. elapsed={plan.draft_load_s:.2f} s, type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, "
            f"avail mem={free:.2f} GB, mem usage={draft_gb:.2f} GB.",
            tp0,
        )
    if failure is not None and failure.phase == "kv":
        await phase(plan.kv_alloc_s * 0.3)
        return failure
    await phase(plan.kv_alloc_s)
    half = cfg.kv_gb / 2
    kv_dtype = "torch.float8_e4m3fn" if args.kv_cache_dtype.startswith("fp8") else f"torch.{m.dtype}"
    log(
        f"KV Cache is allocated. dtype: {kv_dtype}, #tokens: {cfg.kv_tokens}, K size: {half:.2f} GB, V size: {half:.2f} GB",
        tp0,
    )
    avail = cfg.avail_after_static_gb - hw.cuda_context_gb
    if cfg.graph_bs:
        log(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB", tp0)
        log(f"Capture cuda graph bs {list(cfg.graph_bs)}", tp0)
        if failure is not None and failure.phase == "capture":
            await phase(plan.graph_capture_s * 0.2)
            return failure
        await phase(plan.graph_capture_s)
        used = cfg.nonstatic_need_gb - hw.cuda_context_gb
        log(
            f"Capture cuda graph end. Time elapsed: {plan.graph_capture_s:.2f} s. mem usage={used:.2f} GB. "
            f"avail mem={avail - used:.2f} GB.",
            tp0,
        )
    log(
        f"max_total_num_tokens={cfg.kv_tokens}, chunked_prefill_size={cfg.chunked_prefill_size}, "
        f"max_prefill_tokens={cfg.max_prefill_tokens}, max_running_requests={cfg.max_running_requests}, "
        f"context_len={cfg.context_len}, available_gpu_mem={max(avail, 0.0):.2f} GB",
        tp0,
    )
    log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    if failure is not None and failure.phase == "warmup":
        await phase(plan.warmup_s * 0.5)
        return failure
    await phase(plan.warmup_s)
    return None


def print_failure(log: Logger, failure: LaunchFailure) -> None:
    """SGLang's shape: the scheduler's traceback tail, then the parent noticing its child died."""
    log("Scheduler hit an exception: Traceback (most recent call last):", "TP0")
    tail = {
        "load": ("model_runner.py", "load_model"),
        "kv": ("model_runner.py", "init_memory_pool"),
        "capture": ("cuda_graph_runner.py", "capture"),
        "warmup": ("scheduler.py", "run_batch"),
    }[failure.phase]
    sys.stdout.write(f'  File "sglang/srt/model_executor/{tail[0]}", line 1, in {tail[1]}\n')
    for line in failure.lines:
        sys.stdout.write(line + "\n")
    log("Received sigquit from a child process. It usually means the child failed.")
    sys.stdout.flush()


def _arch_name(arch: str) -> str:
    return {"deepseek_v3": "DeepseekV3ForCausalLM", "llama": "LlamaForCausalLM"}.get(arch, arch)
