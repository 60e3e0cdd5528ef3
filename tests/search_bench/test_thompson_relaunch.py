"""Round 25's candidate (``benchmarks.search.thompson_relaunch``): relaunches after exhaustion by Thompson sampling."""

from __future__ import annotations

import json

from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method


def test_it_is_the_searcher_until_the_space_is_exhausted_then_relaunches_feasible_points() -> None:
    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "needle", 124)
    best = family_optimum(land).value
    ours = run_method(land, best, "thompson-relaunch", seed=0, noise=0.1, launches=40)
    theirs = run_method(land, best, "autotune", seed=0, noise=0.1, launches=40)
    keys = [json.dumps(p, sort_keys=True) for p in ours["launched"]]
    first_repeat = next(i for i, k in enumerate(keys) if k in keys[:i])
    assert first_repeat == len(set(keys))  # every launchable point once, then relaunches
    assert ours["launched"][:first_repeat] == theirs["launched"][:first_repeat]
    again = keys[first_repeat:]
    assert all(land.evaluate(json.loads(k)).outcome == "complete" for k in again)
    assert len(set(again)) > 1
