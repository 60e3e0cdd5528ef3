"""Progress events of a trial, sent from the trial (Ray Tune trainable, Serve replica) to the driver.

An event is a frozen record; it crosses process boundaries as JSON (``to_json`` / ``from_json``).
"""

from __future__ import annotations

import enum
import time
from dataclasses import asdict, dataclass, field
from typing import Any


class Phase(str, enum.Enum):
    STARTED = "started"  # the trainable began the trial (params known)
    LAUNCHING = "launching"  # the engine is being deployed onto a Serve replica
    READY = "ready"  # the engine answered /health
    BENCHMARKING = "benchmarking"  # one load level of the benchmark began
    TEARING_DOWN = "tearing_down"  # the engine is being stopped
    ENDED = "ended"  # the run returned its record (sent by the runner; a finalist relaunch's last event)
    FINISHED = "finished"  # the trial's record was written (sent by the driver, not the trial)


@dataclass(frozen=True)
class TrialEvent:
    number: int  # the Optuna trial number
    trial_id: str  # Ray Tune's trial id
    phase: Phase
    at: float = field(default_factory=time.time)  # epoch seconds when it happened
    params: dict[str, Any] = field(default_factory=dict)  # STARTED: the sampled values
    seconds: float | None = None  # READY: deploy -> ready
    level: int | None = None  # BENCHMARKING: 1-based index of the load level
    levels: int | None = None  # BENCHMARKING: how many levels the plan has
    concurrency: int | None = None  # BENCHMARKING: the level's concurrency
    outcome: str = ""  # FINISHED: complete / failed / invalid
    failure: str = ""  # FINISHED: the failure kind, if any
    objective: float | None = None  # FINISHED: the primary objective (feasible trials only)
    throughput: dict[int, float] = field(default_factory=dict)  # FINISHED: output tok/s by concurrency

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["phase"] = self.phase.value
        d["throughput"] = {str(k): v for k, v in self.throughput.items()}
        return d

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrialEvent:
        d = dict(data)
        d["phase"] = Phase(d["phase"])
        d["throughput"] = {int(k): float(v) for k, v in (d.get("throughput") or {}).items()}
        return cls(**d)
