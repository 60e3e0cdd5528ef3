"""Listing a finite search space (autotune.space.enumerate): what the searcher reads to tell an exhausted space."""

from __future__ import annotations

import random
from pathlib import Path

from autotune.space import load_study
from autotune.space.enumerate import discrete_values, distance, finite_points, nearest_first
from autotune.space.types import ParamSpec
from autotune.space.values import rounded

ROOT = Path(__file__).resolve().parents[2]


def test_the_h200_space_lists_with_its_conditional_parameters() -> None:
    spec = load_study(ROOT / "search_spaces" / "h200-tp1-speculative.yaml")
    points = finite_points(spec, 10_000)
    assert points is not None
    # off: 3 caps x 4 fractions; EAGLE3 top-k 1: 3 steps x 12; top-k 2: 3 steps x 5 draft-token counts x 12
    assert len(points) == 12 + 36 + 180
    off = [p for p in points if p["speculative_algorithm"] is None]
    assert all(set(p) == {"speculative_algorithm", "max_running_requests", "mem_fraction_static"} for p in off)
    assert all("speculative_num_draft_tokens" in p for p in points if p.get("speculative_eagle_topk") == 2)
    assert not any("speculative_num_draft_tokens" in p for p in points if p.get("speculative_eagle_topk") == 1)
    assert len({tuple(sorted(p.items(), key=str)) for p in points}) == len(points)
    assert finite_points(spec, 227) is None, "over the limit: not listed"


def test_a_float_is_finite_only_at_a_stated_precision() -> None:
    step = ParamSpec(name="f", type="float", flag="f", low=0.5, high=0.6, step=0.05)
    places = ParamSpec(name="f", type="float", flag="f", low=0.8, high=0.83, round=2)
    free = ParamSpec(name="f", type="float", flag="f", low=0.5, high=0.6)
    assert discrete_values(step) == [0.5, 0.55, 0.6]
    assert discrete_values(places) == [0.8, 0.81, 0.82, 0.83]
    assert discrete_values(free) is None
    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")  # mem_fraction_static: round 2
    assert len(finite_points(spec, 100_000) or []) == 13_590


def test_nearest_first_orders_by_changed_parameters() -> None:
    spec = load_study(ROOT / "search_spaces" / "h200-tp1-speculative.yaml")
    points = finite_points(spec, 10_000) or []
    best = {"speculative_algorithm": None, "max_running_requests": 64, "mem_fraction_static": 0.82}
    ordered = nearest_first(spec, points, best, random.Random(0))
    assert ordered[0] == best and distance(spec, best, best) == 0
    dists = [distance(spec, p, best) for p in ordered]
    assert dists == sorted(dists)
    assert dists[1] == 1.0  # one other cap or fraction
    # switching speculation on adds its active parameters: algorithm, drafter, steps, top-k (+ draft tokens)
    assert (
        distance(
            spec,
            best,
            {
                **best,
                "speculative_algorithm": "EAGLE3",
                "speculative_draft_model_path": "/tmp/models/eagle3-llama-1b",
                "speculative_num_steps": 3,
                "speculative_eagle_topk": 1,
            },
        )
        == 4.0
    )
    steps = next(p for p in spec.params if p.name == "speculative_num_steps")
    a = {"speculative_num_steps": 2}
    assert distance(spec, a, {"speculative_num_steps": 4}) == 1.0 and steps.high == 4 and steps.low == 2
    assert distance(spec, a, {"speculative_num_steps": 3}) == 0.5


def test_a_rounded_float_lists_what_its_draws_launch_as() -> None:
    """``round`` alone rounds a draw anywhere in [low, high]: low 0.05, round 1 launches 0.1 ... 0.9. The listing
    stepped from low (0.05, 0.15, ...), so it missed 0.3 and held 0.95, which launches as 0.9: the searcher kept
    relaunching 0.9 for an unmeasured 0.95 and never reached 0.3."""
    p = ParamSpec(name="f", type="float", flag="f", low=0.05, high=0.95, round=1)
    rng = random.Random(0)
    drawn = {rounded(p, rng.uniform(0.05, 0.95)) for _ in range(20_000)}
    assert discrete_values(p) == sorted(drawn) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    log = ParamSpec(name="f", type="float", flag="f", low=0.001, high=1.0, round=2, log=True)
    values = discrete_values(log) or []
    assert values[:2] == [0.001, 0.01] and values[-1] == 1.0 and len(values) == 101
    assert all(rounded(log, v) == v for v in values)
