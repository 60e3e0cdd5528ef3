"""The Pareto set of feasible trials on the study's objectives (two or more), else peak throughput (maximize) vs
decode latency (minimize). Pure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.bench.metrics import level_value
from autotune.export.accessors import is_speculative, level, level_label
from autotune.export.best import objective_value
from autotune.export.evidence import level_of
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord

# a single-objective study's view: median TPOT at the lowest load level vs output tok/s at the highest
DEFAULT_AXES = (Objective("tpot_ms.median", "min", "minimize"), Objective("output_tok_per_s", "max", "maximize"))


@dataclass(frozen=True)
class Axis:
    objective: Objective  # as the study names it (``max`` / ``min`` kept)
    level: int | str  # the level it is read at: a concurrency, or an open-loop key such as ``rate8``

    @property
    def label(self) -> str:
        """``ttft_ms.p99 at concurrency 128``, ``goodput at 8 req/s``."""
        where = f"concurrency {self.level}" if isinstance(self.level, int) else level_label(self.level)
        return f"{self.objective.metric} at {where}"


@dataclass(frozen=True)
class ParetoPoint:
    number: int
    trial_id: str
    values: tuple[float, ...]  # one per axis, in the front's axis order
    speculative: bool
    params: dict[str, Any]
    flags: dict[str, Any]


@dataclass(frozen=True)
class ParetoFront:
    """Points are feasible trials with a value on every axis; ``front`` is sorted by the first axis, best first (ties
    by the next), ``dominated`` by number. ``study_objectives``: the axes are the study's objectives."""

    axes: tuple[Axis, ...]
    study_objectives: bool
    front: tuple[ParetoPoint, ...]
    dominated: tuple[ParetoPoint, ...]


def dominates(a: ParetoPoint, b: ParetoPoint, axes: Sequence[Axis]) -> bool:
    """a is at least as good on every axis and strictly better on one."""
    better = [ax.objective.better(x, y) for ax, x, y in zip(axes, a.values, b.values, strict=True)]
    worse = [ax.objective.better(y, x) for ax, x, y in zip(axes, a.values, b.values, strict=True)]
    return any(better) and not any(worse)


def pareto_front(
    records: Sequence[TrialRecord], load_levels: Sequence[int], objectives: Sequence[Objective] = ()
) -> ParetoFront:
    """Feasible, completed trials that no other feasible trial dominates. Equal points are all kept. The axes are
    ``objectives`` (their values as the records hold them) where there are two or more, else ``DEFAULT_AXES`` (from
    the measured levels)."""
    own = len(objectives) >= 2
    axes = tuple(Axis(o, _at(o, load_levels)) for o in (objectives if own else DEFAULT_AXES))
    points = []
    for rec in sorted(records, key=lambda r: r.number):
        if not rec.feasible or rec.outcome is not TrialOutcome.COMPLETE:
            continue
        values = [objective_value(rec, ax.objective) if own else _measured(rec, ax) for ax in axes]
        if any(v is None for v in values):
            continue
        points.append(
            ParetoPoint(
                number=rec.number,
                trial_id=rec.trial_id,
                values=tuple(v for v in values if v is not None),
                speculative=is_speculative(rec),
                params=dict(rec.params),
                flags=dict(rec.flags),
            )
        )
    front = [p for p in points if not any(dominates(q, p, axes) for q in points)]
    dominated = [p for p in points if p not in front]
    signs = [1.0 if ax.objective.direction == "minimize" else -1.0 for ax in axes]
    front.sort(key=lambda p: (*(s * v for s, v in zip(signs, p.values, strict=True)), p.number))
    return ParetoFront(axes=axes, study_objectives=own, front=tuple(front), dominated=tuple(dominated))


def _at(objective: Objective, load_levels: Sequence[int]) -> int | str:
    concurrency = level_of(objective, load_levels)
    return concurrency if concurrency is not None else objective.level


def _measured(rec: TrialRecord, axis: Axis) -> float | None:
    lv = level(rec, axis.level)
    value = level_value(lv, axis.objective.metric) if lv is not None else None
    return value if value is not None and math.isfinite(value) else None
