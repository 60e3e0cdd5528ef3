"""The optional stopping rule (``study.stop_when``): end the search when it stops paying.

Walking the trials in order, the *incumbent* is the feasible trial with the best primary objective so far. A trial
*improves* when it is feasible and its objective is beyond the incumbent's noise band: above the upper end of the
incumbent's 95% interval for a maximized objective (below the lower end when minimized), or beyond its value where the
incumbent has no interval (one window). The first feasible trial improves on nothing. Every launched trial (failed,
infeasible or complete; not one rejected before launch) that does not improve adds one to the count; an improvement
resets it. When the count reaches ``no_improvement_launches`` the study stops starting trials, runs its finalist stage
and exports, and says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.bench.metrics import metric_interval
from autotune.bench.stats import Interval
from autotune.space import Objective, StopRule
from autotune.trial.records import TrialOutcome, TrialRecord


@dataclass(frozen=True)
class StopCheck:
    stop: bool
    since_improvement: int  # launches since the last improvement
    incumbent: int | None  # trial number
    reason: str = ""


def _value(record: TrialRecord, objective: Objective) -> float | None:
    v = record.objectives.get(objective.key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _interval(record: TrialRecord, objective: Objective) -> Interval | None:
    if record.bench is None:
        return None
    try:
        return metric_interval(record.bench, objective.metric, objective.level)
    except ValueError:
        return None


def _band_edge(value: float, iv: Interval | None, maximize: bool) -> float:
    if iv is None or iv.low is None or iv.high is None:
        return value
    return iv.high if maximize else iv.low


def check(records: Sequence[TrialRecord], objective: Objective, rule: StopRule) -> StopCheck:
    """Apply the rule to ``records`` in the order given (trial number order)."""
    maximize = objective.direction == "maximize"
    best: TrialRecord | None = None
    best_value = 0.0
    count = 0
    for rec in records:
        if rec.outcome is TrialOutcome.INVALID:
            continue  # no launch was spent
        value = _value(rec, objective) if rec.feasible and rec.outcome is TrialOutcome.COMPLETE else None
        if value is not None and best is None:
            best, best_value, count = rec, value, 0
            continue
        if value is not None and best is not None:
            edge = _band_edge(best_value, _interval(best, objective), maximize)
            if (value > edge) if maximize else (value < edge):
                best, best_value, count = rec, value, 0
                continue
            if (value > best_value) if maximize else (value < best_value):
                best, best_value = rec, value  # better, but within the noise band: not an improvement
        count += 1
    incumbent = best.number if best is not None else None
    if count < rule.no_improvement_launches:
        return StopCheck(False, count, incumbent)
    where = (
        f"beyond the noise band (95% interval) of the incumbent, trial {incumbent}"
        if best is not None
        else "(no feasible trial yet)"
    )
    reason = (
        f"stopped early by study.stop_when: {count} launches in a row without a feasible {objective.key} "
        f"{where} (no_improvement_launches: {rule.no_improvement_launches})"
    )
    return StopCheck(True, count, incumbent, reason)
