"""Objectives and constraints from a benchmark result (pure).

Keys are ``"<metric>@<level>"`` (``"output_tok_per_s@max"``). Constraint values follow Optuna's convention: ``<= 0`` is
satisfied, so ``ttft_ms.p99 <= 2000`` becomes ``value - 2000``. A metric that could not be measured (no successful
request) violates its constraint by a large margin and scores the worst objective. A request that failed at a level an
objective or constraint is measured at makes the trial infeasible (``failed_requests``: their count): the figures of
such a level are those of the requests that survived, and a config that drops requests is not a recommendation (the
report's comparisons and per-load table leave such a level out too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.bench.metrics import metric_value, select_level
from autotune.bench.types import BenchResult, LevelKey
from autotune.space import Constraint, Objective, objective_key

UNMEASURED_VIOLATION = 1e9
FAILED_REQUESTS = "failed_requests"  # requests failed at the judged levels; in a record's constraints only when > 0


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
    failed = failed_requests(result, objectives, constraints)
    if failed:
        cons[FAILED_REQUESTS] = float(failed)
    feasible = all(v <= 0 for v in cons.values())
    return Score(obj, cons, feasible)


def failed_requests(result: BenchResult, objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> int:
    """Requests that failed at the levels the objectives and constraints are measured at (each level once)."""
    failed: dict[LevelKey, int] = {}
    judged_at: list[Objective | Constraint] = [*objectives, *constraints]
    for judged in judged_at:
        if judged.metric != "server_accept_length":  # a whole-run figure, of no level
            lv = select_level(result, judged.level)
            failed[lv.key] = lv.failed
    return sum(failed.values())


def failed_score(objectives: Sequence[Objective], constraints: Sequence[Constraint]) -> Score:
    """A failed or invalid trial: worst objectives, every constraint violated (so the sampler learns the region)."""
    return Score(
        {objective_key(o.metric, o.level): worst_value(o.direction) for o in objectives},
        {objective_key(c.metric, c.level): UNMEASURED_VIOLATION for c in constraints} or {"launch": 1.0},
        False,
    )
