"""Round 31's candidate (``benchmarks.search.first_feasible``): the constraints' margins while no launch is feasible."""

from __future__ import annotations

import math
from typing import Any

from autotune.trial.score import UNMEASURED_VIOLATION
from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method
from benchmarks.search.first_feasible import FirstFeasible, margin


def test_a_margin_is_the_metric_over_its_bound() -> None:
    assert margin(-40.0, None, 100.0) == math.log(0.6)  # a TPOT of 60 ms against at most 100 ms
    assert margin(40.0, None, 100.0) == math.log(1.4)
    assert margin(-5.0, 10.0, None) == math.log(10.0 / 15.0)  # 15 tokens/s against at least 10: within
    assert margin(2.0, None, 0.0) == 2.0  # a bound of 0: the excess itself
    assert margin(UNMEASURED_VIOLATION, None, 100.0) is None


def _runs(monkeypatch: Any, family: str, instance: int) -> tuple[dict[str, Any], dict[str, Any], FirstFeasible]:
    made: list[FirstFeasible] = []
    init = FirstFeasible.__init__

    def _init(self: FirstFeasible, *args: Any, **kw: Any) -> None:
        init(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(FirstFeasible, "__init__", _init)
    land = FamilyLandscape(load_space("h200-tp1-speculative"), family, instance)
    opt = family_optimum(land).value
    base = run_method(land, opt, "autotune", seed=0, noise=0.04, launches=20)
    cand = run_method(land, opt, "first-feasible", seed=0, noise=0.04, launches=20)
    return base, cand, made[0]


def test_once_a_launch_is_feasible_it_is_the_searcher(monkeypatch: Any) -> None:
    base, cand, proposer = _runs(monkeypatch, "spec-step-cost", 2)  # the seed point is feasible here
    assert proposer.margin_picks == 0
    assert cand["launched"] == base["launched"]


def test_while_nothing_is_feasible_the_margins_pick(monkeypatch: Any) -> None:
    base, cand, proposer = _runs(monkeypatch, "capacity", 197)  # no point is feasible on this landscape
    assert proposer.margin_picks > 0
    assert cand["launched"] != base["launched"]
