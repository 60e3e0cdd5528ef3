"""Round 24's candidate (``benchmarks.search.constraint_gp``): feasibility from the constraints' measured margins."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from autotune.trial.score import UNMEASURED_VIOLATION
from benchmarks.search.__main__ import load_space
from benchmarks.search.constraint_gp import ConstraintModel, margin
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method
from benchmarks.search.landscape import enumerate_points


def test_a_margin_is_the_metric_over_its_bound() -> None:
    assert margin(-40.0, None, 100.0) == math.log(0.6)  # a TPOT of 60 ms against at most 100 ms
    assert margin(40.0, None, 100.0) == math.log(1.4)
    assert margin(-5.0, 10.0, None) == math.log(10.0 / 15.0)  # 15 tokens/s against at least 10: within
    assert margin(2.0, None, 0.0) == 2.0  # a bound of 0: the excess itself
    assert margin(UNMEASURED_VIOLATION, None, 100.0) is None


def test_the_margin_model_tells_feasible_points_from_infeasible_ones(monkeypatch: Any) -> None:
    made: list[ConstraintModel] = []
    init = ConstraintModel.__init__

    def _init(self: ConstraintModel, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(ConstraintModel, "__init__", _init)
    land = FamilyLandscape(load_space("speculative"), "capacity", 112)
    run_method(land, family_optimum(land).value, "broken-margins", seed=0, noise=0.04, launches=30)
    (proposer,) = made
    assert proposer._margin_hyper  # the margin GPs were fitted
    points, enc, grid = proposer._listing
    told = list(proposer.measured.values())
    proposer._told_now = told
    x = enc.encode([json.loads(k) for k in proposer.measured])
    chance = proposer._feasible_chance(x, np.array([t.feasible for t in told], dtype=float), enc, grid)
    truth = {json.dumps(p, sort_keys=True): land.evaluate(p) for p in enumerate_points(land.spec)}
    ok = [c for p, c in zip(points, chance, strict=True) if truth[json.dumps(p, sort_keys=True)].feasible]
    bad = [c for p, c in zip(points, chance, strict=True) if not truth[json.dumps(p, sort_keys=True)].feasible]
    assert ok and bad and np.mean(ok) > 1.5 * np.mean(bad)


def test_while_no_completed_launch_breaks_a_constraint_it_is_the_searcher() -> None:
    land = FamilyLandscape(load_space("speculative"), "memory-shapes", 2)
    best = family_optimum(land).value
    theirs = run_method(land, best, "autotune", seed=0, noise=0.04, launches=15)
    ours = run_method(land, best, "broken-margins", seed=0, noise=0.04, launches=15)
    assert theirs["infeasible"] == 0 and theirs["failed"] > 0  # launches fail (out of memory), none breaks a constraint
    assert ours["launched"] == theirs["launched"]
