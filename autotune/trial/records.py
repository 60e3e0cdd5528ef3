"""Outcomes and durable per-trial records (frozen values, JSON round-trippable).

``FailureKind`` and ``PhaseTimings`` live in the leaf module ``autotune.core.failures``; they are re-exported here.
A record keeps what its server ran both as the exact argv and typed (``launch``: ``autotune.trial.launched``); a
record written before the typed launch was kept (schema 0 and 1) gets it read from its argv on loading.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from autotune.bench.types import BenchResult
from autotune.core.failures import FailureKind, PhaseTimings
from autotune.trial.launched import Launched, read_launched

__all__ = ["EngineInfo", "FailureKind", "Launched", "PhaseTimings", "TrialOutcome", "TrialRecord"]


class TrialOutcome(str, enum.Enum):
    COMPLETE = "complete"  # server ran, benchmark measured
    INVALID = "invalid"  # rejected before launch by validity rules (no launch spent)
    FAILED = "failed"  # launch or benchmark failed; see FailureKind


@dataclass(frozen=True)
class EngineInfo:
    """Which engine produced a result. Never present simulated figures as measurements."""

    engine: str  # "sglang" or "sim"
    version: str  # sglang version, or autotune's for the simulator
    simulated: bool
    gpu_name: str  # real GPU name, or the sim profile's declared hardware
    gpu_count: int  # GPUs the server used
    profile: str | None = None  # sim profile name
    time_scale: float | None = None  # sim: simulated seconds per wall second
    node: str | None = None  # hostname / Ray node the server ran on
    serve_app: str | None = None  # the Ray Serve application whose replica ran the server (a study's GPU slot)
    replica_launches: int | None = None  # engines that replica had started, this one included (> 1: a reused slot)
    cpus: str | None = None  # the CPU list the server and its benchmark client were pinned to ("0-7"), if known
    cpu_isolation: str | None = (
        None  # how that set was chosen (autotune.core.cpusets: disjoint, whole node, shared, off)
    )


# Version of the record layout written to ``trials.jsonl``; a reader keeps, and reports, fields it does not know.
# 2: ``launch`` (the typed launch) beside ``argv``; 0 and 1 are read, their launch from their argv.
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class TrialRecord:
    """One finished trial. Invariants (checked on construction, so a bad record is never written): a complete trial has
    no failure kind, a failed one has one, only a complete trial is feasible, the number is >= 0."""

    study: str
    trial_id: str
    number: int  # optuna trial number
    params: dict[str, Any]
    flags: dict[str, Any]
    env: dict[str, str]
    argv: list[str]
    outcome: TrialOutcome
    failure: FailureKind | None = None
    message: str = ""
    log_tail: str = ""
    rejected_flags: list[str] = field(default_factory=list)  # flags the engine refused (UNKNOWN_FLAG / INVALID_VALUE)
    unset_env: list[str] = field(default_factory=list)  # inherited variables removed from the server's environment
    launch: Launched | None = None  # ``argv`` typed: engine, module, options, parallelism; None: nothing launched
    engine: EngineInfo | None = None
    bench: BenchResult | None = None
    phases: PhaseTimings = field(default_factory=PhaseTimings)
    objectives: dict[str, float] = field(default_factory=dict)
    constraints: dict[str, float] = field(default_factory=dict)  # <= 0 means satisfied
    feasible: bool = False
    workload_properties: dict[str, Any] = field(default_factory=dict)  # e.g. SGLANG_SIMULATE_ACC_LEN
    # the accept lengths' source: "measured", "simulated" (sim engine or SGLANG_SIMULATE_ACC_LEN), None: no speculation
    accept_source: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    started_at: str = ""
    finished_at: str = ""
    schema_version: int = SCHEMA_VERSION
    # Fields this version does not know (a record written by a newer autotune), kept so a rewrite does not drop them:
    # a top-level key as itself, a key of ``engine`` / ``phases`` as ``"engine.key"`` / ``"phases.key"``.
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.outcome is TrialOutcome.COMPLETE and self.failure is not None:
            raise ValueError(f"trial {self.number}: a complete record cannot carry failure kind {self.failure.value}")
        if self.outcome is TrialOutcome.FAILED and self.failure is None:
            raise ValueError(f"trial {self.number}: a failed record needs a failure kind (FailureKind.UNKNOWN if none)")
        if self.feasible and self.outcome is not TrialOutcome.COMPLETE:
            raise ValueError(f"trial {self.number}: only a complete record can be feasible")
        if self.number < 0:
            raise ValueError(f"trial number {self.number} is negative")

    def to_json(self) -> dict[str, Any]:
        out = _jsonable(asdict(self))
        out.pop("extra")
        for key, value in self.extra.items():
            head, _, sub = key.partition(".")
            if sub and isinstance(out.get(head), dict):
                out[head].setdefault(sub, value)
            else:
                out.setdefault(key, value)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialRecord:
        """Raises ValueError / TypeError / KeyError for a record that cannot be read; unknown fields go to ``extra``."""
        known = {f.name for f in fields(cls)} - {"extra"}
        d = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        d["outcome"] = TrialOutcome(d["outcome"])
        d["failure"] = FailureKind(d["failure"]) if d.get("failure") else None
        engine, extra_engine = _split(EngineInfo, d.get("engine"), "engine")
        d["engine"] = EngineInfo(**engine) if engine else None
        d["bench"] = BenchResult.from_json(d["bench"]) if d.get("bench") else None
        if d.get("launch"):
            d["launch"] = Launched.from_json(d["launch"])
        else:  # written before the launch was kept typed (schema 0 and 1): read from the argv it ran
            d["launch"] = read_launched(d["engine"].engine if d["engine"] else None, d.get("argv") or [])[0]
        phases, extra_phases = _split(PhaseTimings, d.get("phases"), "phases")
        d["phases"] = PhaseTimings(**phases)
        d.setdefault("schema_version", 0)  # written before versions were recorded
        return cls(**d, extra={**extra, **extra_engine, **extra_phases})

    def unknown_fields(self) -> list[str]:
        return sorted(self.extra)


def _split(kind: type, value: Any, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``value``'s keys that ``kind`` has, and the others as ``{"prefix.key": v}``."""
    if not value:
        return {}, {}
    if not isinstance(value, dict):
        raise TypeError(f"{prefix} is a {type(value).__name__}, not an object")
    names = {f.name for f in fields(kind)}
    return (
        {k: v for k, v in value.items() if k in names},
        {f"{prefix}.{k}": v for k, v in value.items() if k not in names},
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value
