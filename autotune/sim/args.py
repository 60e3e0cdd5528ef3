"""Command line of the simulated server: SGLang ``launch_server`` flag names plus ``--sim-*`` options.

Unknown flags are rejected the way argparse does (exit 2, the message names the flag); ``--help`` lists every flag, so
autotune's flag check against ``--help`` works for this engine as for SGLang. Flags the model does not use are accepted
and recorded (a launcher passes them), never silently invented.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from autotune.engines.sglang_facts import (
    MAX_PREFILL_TOKENS_DEFAULT,
    NGRAM_DEFAULT_BFS_BREADTH,
    NGRAM_DEFAULT_CAPACITY,
    SPEC_ALGORITHMS,
)

ATTENTION_BACKENDS = (
    "triton",
    "flashinfer",
    "fa3",
    "fa4",
    "flashmla",
    "cutlass_mla",
    "trtllm_mla",
    "trtllm_mha",
    "torch_native",
    "aiter",
    "wave",
    "intel_amx",
    "ascend",
)
SCHEDULE_POLICIES = ("fcfs", "lpm", "random", "dfs-weight", "lof", "priority")


@dataclass(frozen=True)
class ServerArgs:
    """Parsed flags. ``None`` means "left unset": the server resolves it like SGLang does."""

    sim_profile: str
    sim_time_scale: float
    sim_seed: int
    sim_noise: float
    sim_launch_speedup: float | None
    sim_stream_interval_ms: float
    sim_hold_timeout_s: float
    model_path: str
    tokenizer_path: str | None
    served_model_name: str | None
    host: str
    port: int
    tp_size: int
    dp_size: int
    ep_size: int
    mem_fraction_static: float | None
    max_running_requests: int | None
    max_total_tokens: int | None
    cuda_graph_max_bs: int | None
    cuda_graph_max_bs_prefill: int | None
    cuda_graph_backend_decode: str | None
    disable_cuda_graph: bool
    disable_prefill_cuda_graph: bool
    chunked_prefill_size: int | None
    max_prefill_tokens: int
    schedule_policy: str
    attention_backend: str | None
    sampling_backend: str | None
    page_size: int
    load_format: str
    trust_remote_code: bool
    disable_custom_all_reduce: bool
    enable_torch_compile: bool
    torch_compile_max_bs: int
    kv_cache_dtype: str
    context_length: int | None
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_draft_load_format: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_ngram_max_bfs_breadth: int
    speculative_ngram_capacity: int
    nccl_port: int | None
    enable_metrics: bool
    stream_interval: int
    log_level: str
    decode_log_interval: int
    disable_overlap_schedule: bool
    enable_mixed_chunk: bool
    random_seed: int | None
    skip_server_warmup: bool
    pp_size: int = 1  # pipeline parallel: counted in the GPUs, not modelled (a launch with pp_size > 1 is refused)
    enable_dp_attention: bool = False  # DP attention: its DP ranks share the TP GPUs; not modelled (refused)
    attn_dp_size: int | None = None
    nnodes: int = 1  # nodes the server spans; rank 0 serves HTTP (autotune.sim.nodes)
    node_rank: int = 0
    dist_init_addr: str | None = None

    @property
    def dp_attention(self) -> bool:
        """DP attention on: ``--enable-dp-attention`` or ``--attn-dp-size`` > 1 (``autotune.engines.sglang_rules``)."""
        return self.enable_dp_attention or (self.attn_dp_size or 1) > 1

    @property
    def gpus(self) -> int:
        """GPUs the server uses, as SGLang counts them (``autotune.core.trial.server_gpus``): tp x pp, times dp
        unless DP attention shares the TP GPUs."""
        return self.tp_size * self.pp_size * (1 if self.dp_attention else self.dp_size)

    @property
    def cuda_graph_disabled(self) -> bool:
        return self.disable_cuda_graph or self.cuda_graph_backend_decode == "disabled"

    def public_dict(self) -> dict[str, Any]:
        """Resolved-args view for ``/server_info`` (SGLang's field names; no ``sim_*`` keys)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("sim_")}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.sim.server",
        description="Simulated SGLang server (autotune). Takes sglang.launch_server flags; results are SIMULATED.",
        allow_abbrev=False,
    )
    sim = p.add_argument_group("simulator")
    sim.add_argument("--sim-profile", default="h200-llama-1b", help="hardware+model profile (autotune/sim/profiles)")
    sim.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="pace: at most this many simulated seconds are released per wall second (figures do not depend on it)",
    )
    sim.add_argument("--sim-seed", type=int, default=0, help="seed for acceptance sampling and noise")
    sim.add_argument("--sim-noise", type=float, default=0.02, help="relative measurement noise on step times")
    sim.add_argument(
        "--sim-launch-speedup",
        type=float,
        default=None,
        help="divide simulated launch time by this (default: ~1.5 s wall)",
    )
    sim.add_argument(
        "--sim-stream-interval-ms",
        type=float,
        default=15.0,
        help="at most one SSE chunk per request per this wall time",
    )
    sim.add_argument(
        "--sim-hold-timeout-s",
        type=float,
        default=30.0,
        help="wall seconds the clock waits for a request a client announced (virtual-clock protocol) before going on",
    )

    g = p.add_argument_group("sglang")
    g.add_argument("--model-path", "--model", required=True)
    g.add_argument("--tokenizer-path", default=None)
    g.add_argument("--tokenizer-mode", default="auto")
    g.add_argument("--skip-tokenizer-init", action="store_true")
    g.add_argument("--served-model-name", default=None)
    g.add_argument("--revision", default=None)
    g.add_argument("--host", default="127.0.0.1")
    g.add_argument("--port", type=int, default=30000)
    g.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    g.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    g.add_argument("--ep-size", "--ep", dest="ep_size", type=int, default=1)
    g.add_argument("--pp-size", type=int, default=1)
    g.add_argument("--attn-dp-size", type=int, default=None)
    g.add_argument("--enable-dp-attention", action="store_true")
    g.add_argument("--mem-fraction-static", type=float, default=None)
    g.add_argument("--max-running-requests", type=int, default=None)
    g.add_argument("--max-total-tokens", type=int, default=None)
    g.add_argument("--max-queued-requests", type=int, default=None)
    g.add_argument(
        "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", dest="cuda_graph_max_bs", type=int, default=None
    )
    g.add_argument("--cuda-graph-max-bs-prefill", type=int, default=None)
    g.add_argument("--cuda-graph-bs", type=int, nargs="+", default=None)
    g.add_argument("--cuda-graph-backend-decode", choices=("full", "breakable", "disabled"), default=None)
    g.add_argument("--disable-cuda-graph", action="store_true")
    g.add_argument("--disable-cuda-graph-padding", action="store_true")
    g.add_argument("--disable-prefill-cuda-graph", action="store_true")
    g.add_argument("--chunked-prefill-size", type=int, default=None)
    g.add_argument("--max-prefill-tokens", type=int, default=MAX_PREFILL_TOKENS_DEFAULT)
    g.add_argument("--schedule-policy", choices=SCHEDULE_POLICIES, default="fcfs")
    g.add_argument("--schedule-conservativeness", type=float, default=1.0)
    g.add_argument("--attention-backend", choices=ATTENTION_BACKENDS, default=None)
    g.add_argument("--decode-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    g.add_argument("--prefill-attention-backend", choices=ATTENTION_BACKENDS, default=None)
    g.add_argument("--sampling-backend", choices=("flashinfer", "pytorch", "ascend"), default=None)
    g.add_argument("--page-size", type=int, default=1)
    g.add_argument(
        "--load-format",
        choices=("auto", "pt", "safetensors", "npcache", "dummy", "sharded_state", "gguf", "bitsandbytes", "layered"),
        default="auto",
    )
    g.add_argument("--trust-remote-code", action="store_true")
    g.add_argument("--dtype", default="auto")
    g.add_argument("--quantization", default=None)
    g.add_argument(
        "--kv-cache-dtype", choices=("auto", "bf16", "bfloat16", "fp8_e5m2", "fp8_e4m3", "fp4_e2m1"), default="auto"
    )
    g.add_argument("--context-length", type=int, default=None)
    g.add_argument("--disable-custom-all-reduce", action="store_true")
    g.add_argument("--enable-nccl-nvls", action="store_true")
    g.add_argument("--enable-symm-mem", action="store_true")
    g.add_argument("--enable-torch-compile", action="store_true")
    g.add_argument("--torch-compile-max-bs", type=int, default=32)
    g.add_argument("--disable-overlap-schedule", action="store_true")
    g.add_argument("--enable-mixed-chunk", action="store_true")
    g.add_argument("--disable-radix-cache", action="store_true")
    g.add_argument("--moe-runner-backend", default="auto")
    g.add_argument("--moe-a2a-backend", default="none")
    g.add_argument("--speculative-algorithm", choices=SPEC_ALGORITHMS, default=None)
    g.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    g.add_argument("--speculative-draft-model-revision", default=None)
    g.add_argument("--speculative-draft-load-format", default=None)
    g.add_argument("--speculative-num-steps", type=int, default=None)
    g.add_argument("--speculative-eagle-topk", type=int, default=None)
    g.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    g.add_argument("--speculative-accept-threshold-single", type=float, default=1.0)
    g.add_argument("--speculative-accept-threshold-acc", type=float, default=1.0)
    g.add_argument("--speculative-attention-mode", choices=("prefill", "decode"), default="prefill")
    g.add_argument("--speculative-draft-attention-backend", default=None)
    g.add_argument("--speculative-ngram-max-bfs-breadth", type=int, default=NGRAM_DEFAULT_BFS_BREADTH)
    g.add_argument("--speculative-ngram-min-bfs-breadth", type=int, default=1)
    g.add_argument("--speculative-ngram-match-type", choices=("BFS", "PROB"), default="BFS")
    g.add_argument("--speculative-ngram-max-trie-depth", type=int, default=18)
    g.add_argument("--speculative-ngram-capacity", type=int, default=NGRAM_DEFAULT_CAPACITY)
    g.add_argument("--speculative-adaptive", action="store_true")  # 0.5.17: EAGLE/EAGLE3 with topk 1 only
    g.add_argument("--speculative-adaptive-config", default=None)
    g.add_argument("--nccl-port", type=int, default=None)
    g.add_argument("--dist-init-addr", default=None)
    g.add_argument("--nnodes", type=int, default=1)
    g.add_argument("--node-rank", type=int, default=0)
    g.add_argument("--base-gpu-id", type=int, default=0)
    g.add_argument("--gpu-id-step", type=int, default=1)
    g.add_argument("--device", default="cuda")
    g.add_argument("--enable-metrics", action="store_true")
    g.add_argument("--enable-cache-report", action="store_true")
    g.add_argument("--stream-interval", type=int, default=1)
    g.add_argument("--stream-output", action="store_true")
    g.add_argument("--log-level", default="info")
    g.add_argument("--log-level-http", default=None)
    g.add_argument("--log-requests", action="store_true")
    g.add_argument("--decode-log-interval", type=int, default=40)
    g.add_argument("--show-time-cost", action="store_true")
    g.add_argument("--random-seed", type=int, default=None)
    g.add_argument("--watchdog-timeout", type=float, default=300.0)
    g.add_argument("--skip-server-warmup", action="store_true")
    g.add_argument("--api-key", default=None)
    g.add_argument("--chat-template", default=None)
    g.add_argument("--num-continuous-decode-steps", type=int, default=1)
    return p


def parse_args(argv: Sequence[str] | None = None) -> ServerArgs:
    """Parse like SGLang; exits 2 with argparse's message on an unknown or malformed flag."""
    ns = build_parser().parse_args(argv)
    names = {f.name for f in fields(ServerArgs)}
    return ServerArgs(**{k: v for k, v in vars(ns).items() if k in names})
