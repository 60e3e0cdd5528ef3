"""Why a trial failed, and how long each phase of a launch took: values every layer shares.

A leaf module (it imports nothing of autotune), so the benchmark, the engines, the errors and the records can all name a
``FailureKind`` without importing each other. ``autotune.core.errors.failure_kind`` maps an exception to its kind.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class FailureKind(str, enum.Enum):
    OOM_AT_LAUNCH = "oom_at_launch"  # not enough memory for weights / KV cache
    GRAPH_CAPTURE_FAILED = "graph_capture_failed"  # CUDA graph capture failed (often OOM)
    NCCL_ERROR = "nccl_error"
    UNKNOWN_FLAG = "unknown_flag"  # the installed release does not know a flag
    INVALID_VALUE = (
        "invalid_value"  # the installed release knows the flag but rejects its value (argparse choices/type)
    )
    ENGINE_UNAVAILABLE = "engine_unavailable"  # the engine is not installed, or its --help fails
    HELP_TIMEOUT = "help_timeout"  # the engine's --help did not finish (flags could not be checked)
    INVALID_CONFIG = "invalid_config"  # rejected by validity rules
    HEALTH_TIMEOUT = "health_timeout"  # process alive but never ready
    CRASHED_AT_LAUNCH = "crashed_at_launch"  # exited before ready, other reason
    CRASHED_UNDER_LOAD = "crashed_under_load"  # died while benchmarked
    BENCH_ERROR = "bench_error"  # requests failed / server answered errors
    DEPLOY_ERROR = "deploy_error"  # Ray Serve could not place or start the replica, or the replica stopped answering
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class PhaseTimings:
    """Seconds; None when the phase was not seen. Parsed from the server log and measured by the runner."""

    launch_to_ready_s: float | None = None  # engine process start -> /health 200 (measured)
    weights_loaded_s: float | None = None  # from log: offset of 'Load weight end'
    kv_cache_tokens: int | None = None  # from log: 'KV Cache is allocated ... #tokens: N'
    graph_capture_s: float | None = None  # from log: capture begin -> end
    max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    deploy_to_ready_s: float | None = None  # serve.run -> ready (includes Ray/Serve)
    serve_run_s: float | None = None  # the serve.run call: replica placed, its process started, constructor run
    replica_start_s: float | None = None  # serve.run called -> replica constructor entered (Ray/Serve + imports)
    preflight_s: float | None = None  # flag check against the installed release's --help (cached per node)
    gpu_wait_s: float | None = None  # before the launch: until the GPUs' memory read free (a previous server exiting)
    bench_s: float | None = None
    teardown_s: float | None = None
    trial_wall_s: float | None = None
