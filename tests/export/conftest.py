"""Hand-built trial records for the export tests: a small study with every kind of outcome."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from autotune.bench.stats import Interval
from autotune.bench.types import BenchResult, Dist, LevelSummary
from autotune.space import Objective
from autotune.trial.launched import Launched
from autotune.trial.records import EngineInfo, FailureKind, TrialOutcome, TrialRecord

LEVELS = (1, 8, 32, 128)
OBJECTIVES = [Objective("output_tok_per_s", "max", "maximize"), Objective("ttft_ms.p99", "max", "minimize")]
SIM = EngineInfo(
    engine="sim",
    version="0.1.0",
    simulated=True,
    gpu_name="NVIDIA RTX PRO 6000 Blackwell",
    gpu_count=8,
    profile="kimi-k2.5-int4-8x-rtxpro6000",
    time_scale=20.0,
)
REAL = EngineInfo(engine="sglang", version="0.5.17", simulated=False, gpu_name="NVIDIA H200", gpu_count=2, node="gpu-7")
PUBLIC_DRAFTER = "/models/kimi-k2-eagle3-public"
CUSTOM_DRAFTER = "/models/k2.5-eagle3-custom"


def dist(median: float, p99: float | None = None) -> Dist:
    return Dist(mean=median, median=median, p90=median, p99=p99 if p99 is not None else median * 1.5, count=16)


def level(
    c: int,
    tput: float,
    *,
    tpot: float = 10.0,
    ttft_p99: float = 100.0,
    accept: float | None = None,
    failed: int = 0,
    window_pct: float | None = None,
) -> LevelSummary:
    w = (window_pct or 0.0) / 100.0
    return LevelSummary(
        concurrency=c,
        requests=16,
        failed=failed,
        duration_s=10.0,
        output_tok_per_s=tput,
        request_per_s=1.0,
        input_tok_per_s=tput / 2,
        ttft_ms=dist(ttft_p99 / 2, ttft_p99),
        itl_ms=dist(tpot),
        tpot_ms=dist(tpot),
        e2e_ms=dist(tpot * 256),
        accept_length=accept,
        # its measurement windows' 95% interval, +-window_pct (None: one window, no interval)
        intervals={"output_tok_per_s": Interval(tput, tput * w, 3, tput * (1 - w), tput * (1 + w))}
        if window_pct
        else {},
    )


def with_argv(record: TrialRecord, argv: list[str]) -> TrialRecord:
    """``record`` as if its server had run ``argv``: the argv and the typed launch the runner reads from it."""
    engine = record.engine.engine if record.engine is not None else None
    return replace(record, argv=argv, launch=Launched.from_argv(engine, argv) if argv else None)


def argv_for(flags: Mapping[str, Any], port: int = 31000) -> list[str]:
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/kimi-k2.5", "--tp-size", "8"]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    for key, value in flags.items():
        if value is True:
            argv.append(f"--{key}")
        elif value not in (None, False):
            argv += [f"--{key}", str(value)]
    return argv


def make_record(
    number: int,
    *,
    tputs: Mapping[int, float] | None = None,
    tpots: Mapping[int, float] | None = None,
    flags: Mapping[str, Any] | None = None,
    params: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    accept: float | None = None,
    server_accept: float | None = None,
    outcome: TrialOutcome = TrialOutcome.COMPLETE,
    failure: FailureKind | None = None,
    constraints: Mapping[str, float] | None = None,
    objective: float | None = None,
    engine: EngineInfo | None = SIM,
    message: str = "",
    log_tail: str = "",
    window_pct: float | None = None,
) -> TrialRecord:
    flags = dict(flags or {})
    bench = None
    if tputs is not None:
        tpots = tpots or {}
        levels = tuple(
            level(c, t, tpot=tpots.get(c, 10.0 + c / 8), accept=accept, window_pct=window_pct)
            for c, t in sorted(tputs.items())
        )
        bench = BenchResult(levels=levels, server_accept_length=server_accept)
    constraints = dict(constraints if constraints is not None else {"ttft_ms.p99@max": -100.0})
    complete = outcome is TrialOutcome.COMPLETE
    objectives = {}
    if complete and tputs is not None:
        objectives = {"output_tok_per_s@max": objective if objective is not None else tputs[max(tputs)]}
        objectives["ttft_ms.p99@max"] = 100.0
    return TrialRecord(
        study="demo",
        trial_id=f"t{number:04d}",
        number=number,
        params=dict(params if params is not None else flags),
        flags=flags,
        env=dict(env or {"NCCL_ALGO": "Ring"}),
        argv=argv_for(flags),
        launch=Launched.from_argv(engine.engine if engine is not None else None, argv_for(flags)),
        outcome=outcome,
        failure=failure,
        message=message,
        log_tail=log_tail,
        engine=engine,
        bench=bench,
        objectives=objectives,
        constraints=constraints if complete else {},
        feasible=complete and all(v <= 0 for v in constraints.values()),
    )


def _eagle(drafter: str, **extra: Any) -> dict[str, Any]:
    return {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": drafter, **extra}


def study_records(window_pct: float | None = None) -> list[TrialRecord]:
    """``window_pct``: each level's measurement-window interval (None: none, one window).
    0: plain best at peak. 1: spec public drafter, capped at 48, misses the SLO at 128.
    2: spec custom drafter, accept length 1.0. 3: plain, dominated. 4: spec with the cap lifted, low latency.
    5-7: failures."""
    return [
        make_record(
            0,
            window_pct=window_pct,
            tputs={1: 60, 8: 400, 32: 1200, 128: 2370},
            tpots={1: 15.0},
            flags={"mem-fraction-static": 0.85},
        ),
        make_record(
            1,
            window_pct=window_pct,
            tputs={1: 90, 8: 600, 32: 1100, 128: 849},
            tpots={1: 10.0},
            flags=_eagle(PUBLIC_DRAFTER),
            accept=2.1,
            server_accept=2.1,
            constraints={"ttft_ms.p99@max": 500.0},
        ),
        make_record(
            2,
            window_pct=window_pct,
            tputs={1: 40.8, 8: 250, 32: 500, 128: 597},
            tpots={1: 24.5},
            flags=_eagle(CUSTOM_DRAFTER),
            accept=1.0,
            server_accept=1.0,
        ),
        make_record(
            3,
            window_pct=window_pct,
            tputs={1: 58, 8: 380, 32: 1100, 128: 2000},
            tpots={1: 16.0},
            flags={"mem-fraction-static": 0.8},
        ),
        make_record(
            4,
            window_pct=window_pct,
            tputs={1: 95, 8: 620, 32: 1150, 128: 2100},
            tpots={1: 9.0},
            flags=_eagle(PUBLIC_DRAFTER, **{"max-running-requests": 128}),
            accept=2.3,
        ),
        make_record(
            5,
            window_pct=window_pct,
            outcome=TrialOutcome.FAILED,
            failure=FailureKind.OOM_AT_LAUNCH,
            flags={"mem-fraction-static": 0.5},
            message="server exited before ready",
            log_tail="loading...\nRuntimeError: Not enough memory. Please try to increase --mem-fraction-static\n\n",
        ),
        make_record(
            6,
            window_pct=window_pct,
            outcome=TrialOutcome.INVALID,
            failure=FailureKind.INVALID_CONFIG,
            flags=_eagle(PUBLIC_DRAFTER, **{"speculative-num-steps": 3}),
            message="steps set without topk",
            engine=None,
        ),
        make_record(
            7,
            window_pct=window_pct,
            outcome=TrialOutcome.FAILED,
            failure=FailureKind.OOM_AT_LAUNCH,
            flags={"mem-fraction-static": 0.55},
            message="server exited before ready",
            log_tail="Loaded weights leave no GPU memory for the KV cache",
        ),
    ]


@pytest.fixture
def records() -> list[TrialRecord]:
    return study_records()


@pytest.fixture
def record_factory() -> Callable[..., TrialRecord]:
    return make_record


@pytest.fixture
def levels() -> tuple[int, ...]:
    return LEVELS


@pytest.fixture
def objectives() -> list[Objective]:
    return list(OBJECTIVES)


@pytest.fixture
def real_engine() -> EngineInfo:
    return REAL


@pytest.fixture
def drafters() -> dict[str, str]:
    return {"public": PUBLIC_DRAFTER, "custom": CUSTOM_DRAFTER}


# A TP-16 trial over 2 nodes of 8 GPUs as the runner records it: rank 0's argv, with the node rank and rank 0's
# address (a port picked for that trial) that the replica set (autotune.serve.app).
MULTINODE_ARGV = [
    "python3",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/k2",
    "--tp-size",
    "16",
    "--nnodes",
    "2",
    "--host",
    "127.0.0.1",
    "--port",
    "31000",
    "--nccl-port",
    "31001",
    "--node-rank",
    "0",
    "--dist-init-addr",
    "10.9.8.7:45678",
]
