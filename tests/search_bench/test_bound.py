"""The needle bound (benchmarks/search/bound.py): the fewest launches any searcher can need, in expectation over where
the needle is, is what a search covering one new cell per launch needs, and no search does better."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest

from autotune.space import load_study
from benchmarks.search.bound import needle_bound, ordered_search_mean
from benchmarks.search.families import FamilyLandscape
from benchmarks.search.landscape import enumerate_points
from benchmarks.search.metrics import launches_to

ROOT = Path(__file__).resolve().parents[2]


def test_ordered_search_mean() -> None:
    assert ordered_search_mean(1) == 1.0
    assert ordered_search_mean(24) == 12.5
    assert ordered_search_mean(80) == pytest.approx(820 / 80 + 0.5 * 80)  # half never found within 40 launches


def _launches(land: FamilyLandscape, cell: str, order: list[dict[str, object]]) -> float:
    """Launches to 98% of the optimum (noise-free; never within 40 counted as 80) of launching ``order`` with the
    landscape's needle moved to ``cell``."""
    land.needle, land._cache = cell, {}
    values = [land.evaluate(p).true_value for p in enumerate_points(land.spec)]
    best, optimum, ratios = 0.0, max(values), []
    for p in order[:40]:
        best = max(best, land.evaluate(p).true_value)
        ratios.append(best / optimum)
    x = launches_to(ratios)
    return x if x <= 40 else 80.0


def test_the_bound_is_reached_by_an_ordered_search_and_not_beaten_by_random_sampling() -> None:
    land = FamilyLandscape(load_study(ROOT / "search_spaces" / "h200x2-tp2-nccl.yaml"), "needle", 0)
    b = needle_bound(land)
    assert (b.cells, b.decisive, b.mean_launches) == (24, 24, 12.5)
    launchable = land._launchable()
    cells = sorted({land._cell(p) for p in launchable})
    one_each = [next(p for p in launchable if land._cell(p) == c) for c in cells]
    ordered = statistics.fmean(_launches(land, c, one_each) for c in cells)
    assert ordered == pytest.approx(b.mean_launches)  # every cell decisive: a cell found exactly when launched
    rng = random.Random(0)
    drawn = statistics.fmean(_launches(land, c, [rng.choice(launchable) for _ in range(40)]) for c in cells * 5)
    assert drawn > b.mean_launches


def test_a_landscape_without_a_needle_is_refused() -> None:
    land = FamilyLandscape(load_study(ROOT / "search_spaces" / "nccl.yaml"), "plateau", 0)
    with pytest.raises(ValueError, match="not a needle landscape"):
        needle_bound(land)
