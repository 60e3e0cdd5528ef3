"""What the finalist stage produces, as data: a relaunch (``FinalistRun``), a stage's plan (``StagePlan``), the
decision over the relaunches (``Decision``, ``FinalistStats``, ``Comparison``) and the study's finalist outcome
(``FinalistOutcome``), plus the lookup of the trial that measured the study's baseline (``baseline_number``).

This module is the part of ``autotune.finalists`` the export imports (``tests/test_import_graph.py`` holds it to that):
it computes nothing about the stage. ``choice`` decides, ``store`` keeps the runs, ``stage`` relaunches.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from autotune.bench.stats import Interval
from autotune.trial.records import TrialRecord

Direction = Literal["maximize", "minimize"]
RUN_KIND = "finalist"


@dataclass(frozen=True)
class FinalistRun:
    """One relaunch of a finalist: which stage and round, which trial it repeats, and its full record."""

    stage: int
    round: int
    repeats: int  # the trial number it repeats
    repeats_trial_id: str
    record: TrialRecord  # trial_id ``<repeated trial_id>-f<stage>r<round>``
    kind: str = RUN_KIND

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.stage, self.round, self.repeats)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "stage": self.stage,
            "round": self.round,
            "repeats": self.repeats,
            "repeats_trial_id": self.repeats_trial_id,
            "record": self.record.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FinalistRun:
        return cls(
            stage=int(data["stage"]),
            round=int(data["round"]),
            repeats=int(data["repeats"]),
            repeats_trial_id=str(data["repeats_trial_id"]),
            record=TrialRecord.from_json(dict(data["record"])),
            kind=str(data.get("kind", RUN_KIND)),
        )


@dataclass(frozen=True)
class StagePlan:
    """A finalist stage: the trial numbers relaunched (best first) and how many rounds."""

    stage: int
    finalists: tuple[int, ...]
    rounds: int

    def slots(self) -> list[tuple[int, int]]:
        """``(round, trial number)`` in launch order: every finalist once per round, rounds one after another."""
        return [(r, n) for r in range(1, self.rounds + 1) for n in self.finalists]

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "finalists": list(self.finalists), "rounds": self.rounds}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StagePlan:
        return cls(
            stage=int(data["stage"]), finalists=tuple(int(n) for n in data["finalists"]), rounds=int(data["rounds"])
        )


def baseline_number(records: Sequence[TrialRecord], point: Mapping[str, Any] | None) -> int | None:
    """The trial that measured the study's baseline (``StudySpec.baseline``): the first whose params hold every value
    the point names. A point may name a subset of the parameters (the rest is sampled), and a float parameter's value
    may be written as an integer (``1`` for ``1.0``)."""
    if point is None:
        return None
    for rec in sorted(records, key=lambda r: r.number):
        if all(k in rec.params and _same_value(rec.params[k], v) for k, v in point.items()):
            return rec.number
    return None


def _same_value(a: Any, b: Any) -> bool:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if numbers:
        return bool(float(a) == float(b))
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@dataclass(frozen=True)
class FinalistStats:
    """One finalist over its relaunches."""

    number: int
    trial_id: str
    params: dict[str, Any]
    values: tuple[float, ...]  # the primary objective of each clean launch
    launches: int
    unclean: int  # launches that failed or missed a constraint
    objective: Interval | None
    ttft_p99: tuple[float, ...]  # per clean launch, at the objective's level
    mem_fraction: float | None

    @property
    def mean(self) -> float | None:
        return self.objective.mean if self.objective is not None else None


@dataclass(frozen=True)
class Comparison:
    """The leader against one other finalist on the primary objective."""

    number: int
    diff_pct: (
        float  # the leader's advantage in % of the other: (leader - other) / |other| x 100, minimize: (other - leader)
    )
    p_value: float | None  # Welch's two-sided p; None with fewer than 2 launches on a side
    separable: bool


@dataclass(frozen=True)
class Decision:
    method: Literal["separable", "tie", "single", "incomplete", "none"]
    winner: int | None
    winner_trial_id: str | None
    summary: str
    objective_key: str
    direction: Direction
    alpha: float
    tied: tuple[int, ...] = ()
    tie_within_pct: float | None = None
    secondary: str = ""
    comparisons: tuple[Comparison, ...] = ()
    stats: tuple[FinalistStats, ...] = field(default_factory=tuple)
    stages: tuple[int, ...] = ()
    leader: int | None = None  # the best mean among the clean finalists

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["stats"] = [{**asdict(s), "mean": s.mean} for s in self.stats]
        return data


@dataclass(frozen=True)
class FinalistOutcome:
    """What the export says about the finalist stage: the finalists, the decision over every stage run for them
    (pooled), and each stage's own decision (a repeat of the stage should give the same winner or the same tie)."""

    finalists: tuple[int, ...]
    decision: Decision | None  # None: no stage ran for these finalists (see note)
    per_stage: tuple[Decision, ...] = ()
    note: str = ""
    launches: int = 0  # relaunches stored for these finalists (the stage's cost)
    baseline: int | None = None  # the trial that measured the study's baseline, where one did
    runs: tuple[FinalistRun, ...] = ()  # the relaunches the decision counted (every stage for these finalists)
    # The winner at every load level over its clean relaunches: per level, each metric's mean across launches and its
    # 95% interval across launches (``verify_compare.across_launches``; n = launches). Empty without a winner.
    winner_levels: tuple[dict[str, Any], ...] = ()

    @property
    def winner_launches(self) -> int:
        """Clean relaunches behind ``winner_levels``."""
        d = self.decision
        stats = [s for s in d.stats if s.number == d.winner] if d is not None else []
        return len(stats[0].values) if stats else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "finalists": list(self.finalists),
            "note": self.note,
            "launches": self.launches,
            "baseline": self.baseline,
            "decision": self.decision.to_json() if self.decision else None,
            "per_stage": [d.to_json() for d in self.per_stage],
            "winner_launches": self.winner_launches,
            "winner_levels": list(self.winner_levels),
        }
