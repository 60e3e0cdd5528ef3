"""Round 9's candidate export rule (``benchmarks.search.model_pick``)."""

from __future__ import annotations

import dataclasses

from autotune.trial.records import TrialOutcome, TrialRecord
from benchmarks.search.__main__ import load_space
from benchmarks.search.drivers import Lab
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method
from benchmarks.search.model_pick import ModelPick, PickLab, replay


def _land() -> FamilyLandscape:
    return FamilyLandscape(load_space("h200-tp1-speculative"), "memory-shapes", 0)


def test_replay_measures_the_same_launches_draw_for_draw() -> None:
    """A run replayed through the plain ``Lab`` is the run itself: the same measurements, exports and finalist
    stage; so a replay through ``PickLab`` differs from it by the export rule alone."""
    land = _land()
    opt = family_optimum(land).value
    base = run_method(land, opt, "autotune", seed=3, noise=0.04, launches=20, finalists=(3, 2))

    class Plain(PickLab):
        def exported(self) -> TrialRecord | None:
            return Lab.exported(self)

        def finalist_numbers(self, count: int) -> tuple[int, ...]:
            return Lab.finalist_numbers(self, count)

    import benchmarks.search.model_pick as mp

    saved = mp.PickLab
    mp.PickLab = Plain  # type: ignore[misc]
    try:
        again = replay(base, land, opt, "autotune", (3, 2)).to_json()
    finally:
        mp.PickLab = saved  # type: ignore[misc]
    assert again["ratios"] == base["ratios"] and again["finalist_ratio"] == base["finalist_ratio"]
    assert (again["failed"], again["infeasible"], again["invalid"]) == (
        base["failed"],
        base["infeasible"],
        base["invalid"],
    )
    picked = replay(base, land, opt, "autotune-mpick", (3, 2)).to_json()
    assert picked["launched"] == base["launched"] and picked["method"] == "autotune-mpick"


def test_repeats_outweigh_one_lucky_draw_and_only_feasible_launches_are_ranked() -> None:
    """Point A measured 100, 101, 99, 100 and point B 97, 96, 98, 104 (with a few lesser points around them): the
    measured order exports B on its one lucky draw; the model, which sees the spread of B's repeats, exports A. A
    launch that missed a constraint is never ranked, however high its value."""
    land = _land()
    lab = Lab(land, 0.0, 0, 1.0)
    key = land.objective_key
    points = [p for p in _valid_points(land) if land.evaluate(p).outcome == "complete"]
    a, b, others = points[0], points[len(points) // 2], points[1 : -1 : max(1, len(points) // 8)][:6]
    plan = [(a, v) for v in (100, 101, 99, 100)] + [(b, v) for v in (97, 96, 98, 104)]
    plan += [(p, 80.0 + 2 * i) for i, p in enumerate(others)]
    records = []
    for n, (p, v) in enumerate(plan):
        rec = lab.measure(n, f"t{n}", p)
        records.append(
            dataclasses.replace(rec, objectives={key: float(v)}, feasible=True, outcome=TrialOutcome.COMPLETE)
        )
    assert max(records, key=lambda r: r.objectives[key]).params == b
    ranked = ModelPick(land.spec, 0).ranked(records)
    assert ranked[0].params == a
    assert {r.number for r in ranked} == {r.number for r in records}
    lucky = dataclasses.replace(records[-1], objectives={key: 500.0}, feasible=False)
    assert lucky.number not in {r.number for r in ModelPick(land.spec, 0).ranked([*records[:-1], lucky])}


def _valid_points(land: FamilyLandscape) -> list[dict[str, object]]:
    from benchmarks.search.landscape import enumerate_points

    return [dict(p) for p in enumerate_points(land.spec, float_points=3)]
