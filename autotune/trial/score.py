"""Objectives and constraints from a benchmark result (pure).

Keys are ``"<metric>@<level>"`` (``"output_tok_per_s@max"``). Constraint values follow Optuna's convention: ``<= 0`` is
satisfied, so ``ttft_ms.p99 <= 2000`` becomes ``value - 2000``. A metric that could not be measured (no successful
request) violates its constraint by a large margin and scores the worst objective.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.bench.metrics import metric_value
from autotune.bench.types import BenchResult
from autotune.space import Constraint, Objective, objective_key

UNMEASURED_VIOLATION = 1e9


def worst_value(direction: str) -> float:
    """What a failed or invalid trial reports for an objective: the worst possible."""
    return 0.0 if direction == "maximize" else 1e12


@dataclass(frozen=True)
class Score:
    objectives: dict[str, float]
    constraints: dict[str, float]
    feasible: bool

    def objective_values(self, objectives: Sequence[Objective]) -> list[float]:
        return [self.objectives[objective_key(o.metric, o.level)] for o in objectives]


def score(result: BenchResult, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> Score:
    obj: dict[str, float] = {}
    for o in objectives:
        v = metric_value(result, o.metric, o.level)
        obj[objective_key(o.metric, o.level)] = worst_value(o.direction) if v is None else float(v)
    cons: dict[str, float] = {}
    for c in constraints:
        v = metric_value(result, c.metric, c.level)
        key = objective_key(c.metric, c.level)
        if v is None:
            cons[key] = UNMEASURED_VIOLATION
            continue
        parts = []
        if c.max is not None:
            parts.append(float(v) - c.max)
        if c.min is not None:
            parts.append(c.min - float(v))
        cons[key] = max(parts) if parts else 0.0
    feasible = all(v <= 0 for v in cons.values())
    return Score(obj, cons, feasible)


def failed_score(objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> Score:
    """A failed or invalid trial: worst objectives, every constraint violated (so the sampler learns the region)."""
    return Score(
        {objective_key(o.metric, o.level): worst_value(o.direction) for o in objectives},
        {objective_key(c.metric, c.level): UNMEASURED_VIOLATION for c in constraints} or {"launch": 1.0},
        False,
    )
