"""The landscape families (benchmarks/search/families.py) and their benchmark (family_bench.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.search import jsonio
from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FAMILIES, FamilyLandscape, applies, family_optimum
from benchmarks.search.family_bench import goal_table, main, run_method, table
from benchmarks.search.landscape import enumerate_points

EAGLE = {
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "/tmp/models/eagle3-llama-1b",
    "speculative_eagle_topk": 1,
    "max_running_requests": 128,
    "mem_fraction_static": 0.82,
}


def test_a_family_is_drawn_from_its_own_seed() -> None:
    spec = load_space("h200-tp1-speculative")
    a, b = FamilyLandscape(spec, "needle", 0), FamilyLandscape(spec, "needle", 0)
    c = FamilyLandscape(spec, "needle", 1)
    points = enumerate_points(spec, float_points=4)
    assert [a.evaluate(p) for p in points] == [b.evaluate(p) for p in points]
    assert [a.evaluate(p).objective for p in points] != [c.evaluate(p).objective for p in points]


def test_sglang_s_own_rules_still_decide_validity_and_memory() -> None:
    spec = load_space("h200-tp1-speculative")
    for family in FAMILIES:
        land = FamilyLandscape(spec, family, 0)
        bad = land.evaluate(
            {**EAGLE, "speculative_num_steps": 4, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 4}
        )
        assert bad.outcome == "invalid" and not bad.launched
        oom = land.evaluate({"speculative_algorithm": None, "max_running_requests": None, "mem_fraction_static": 0.01})
        assert oom.outcome == "failed" and oom.true_value == 0.0


def test_the_speed_over_steps_is_not_the_chain_model_s() -> None:
    """spec-nonmonotone: the chain model's speed over steps, L(k) / (1 + c k), rises then falls; in some drawn
    landscape the family's has a valley (a step count slower than both its neighbours)."""
    spec = load_space("speculative")
    point = {
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "/models/public-k2-eagle3",
        "speculative_eagle_topk": 1,
        "max_running_requests": 128,
        "mem_fraction_static": 0.9,
    }
    valleys = 0
    for instance in range(6):
        land = FamilyLandscape(spec, "spec-nonmonotone", instance)
        v = [land.evaluate({**point, "speculative_num_steps": k}).objective for k in range(1, 6)]
        valleys += any(v[i] < v[i - 1] and v[i] < v[i + 1] for i in range(1, len(v) - 1))
    assert valleys > 0


def test_infeasible_regions_grow_with_the_family() -> None:
    for space in ("nccl", "speculative"):
        spec = load_space(space)
        cover = {}
        for family in ("infeasible-small", "infeasible-large"):
            land = FamilyLandscape(spec, family, 0)
            points = land._launchable()
            cover[family] = sum(any(land._in(p, r) for r in land.regions) for p in points) / len(points)
            assert all(not land.evaluate(p).feasible for p in points if any(land._in(p, r) for r in land.regions))
        assert 0.1 <= cover["infeasible-small"] < 0.4 < 0.5 <= cover["infeasible-large"] < 0.8


def test_applies() -> None:
    nccl, spec = load_space("nccl"), load_space("speculative")
    assert not applies("spec-step-cost", nccl) and applies("spec-step-cost", spec)
    assert not applies("capacity", nccl) and not applies("memory-shapes", nccl) and applies("needle", nccl)


@pytest.mark.parametrize("method", ["autotune", "pipeline-random", "tpe-plain", "no-defer", "grid"])
def test_methods_run_and_judge_the_export_by_its_true_value(method: str) -> None:
    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "interactions", 0)
    best = family_optimum(land).value
    run = run_method(land, best, method, seed=0, noise=0.04, launches=6)
    assert run["method"] == method and 0 < len(run["ratios"]) <= 6
    assert all(0.0 <= x <= 1.0 + 1e-9 for x in run["ratios"])


def test_cli_writes_runs_and_the_table(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "f.json.gz"
    assert (
        main(
            [
                "run",
                "--families",
                "needle",
                "--spaces",
                "h200x2-tp2-nccl",
                "--seeds",
                "1",
                "--noise",
                "0",
                "--launches",
                "5",
                "--methods",
                "autotune",
                "pipeline-random",
                "no-defer",
                "--ablation-noise",
                "0",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    doc = jsonio.load(out)
    assert doc["complete"] and {r["method"] for r in doc["runs"]} == {"autotune", "pipeline-random", "no-defer"}
    # no seed point launched last in this space: removing that rule changes nothing, the run is copied
    assert next(r for r in doc["runs"] if r["method"] == "no-defer").get("copied_from") == "autotune"
    text = table(doc["runs"], 5)
    assert "| needle |" in text and "worst family" in text


def test_the_goal_check_also_reads_the_landscapes_either_method_reaches() -> None:
    def run(method: str, variant: str, seed: int, reach_at: int | None) -> dict[str, object]:
        ratios = [0.9] * 40 if reach_at is None else [0.9] * (reach_at - 1) + [1.0] * (41 - reach_at)
        return dict(method=method, family="needle", space="nccl", variant=variant, seed=seed, noise=0.04, ratios=ratios)

    runs = [
        r
        for seed in (0, 1)
        for r in (
            run("autotune", "easy", seed, 2),
            run("pipeline-random", "easy", seed, 4),
            run("autotune", "hard", seed, None),  # neither method gets within 2%: counted as 80 for both
            run("pipeline-random", "hard", seed, None),
        )
    ]
    row = next(line for line in goal_table(runs, 40).splitlines() if line.startswith("| needle |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2].startswith(f"{(2 + 80) / (4 + 80):.2f}")
    assert cells[4] == "0.50 [0.50, 0.50] (1 of 2)"


def test_the_goal_check_s_median_ratio_where_only_the_base_method_never_gets_there() -> None:
    """The searcher's median is 5 launches, random sampling's beyond the budget: the median ratio is below 5 / 41, not
    'both >40' (nor 0); the other way round it is inf."""

    def run(method: str, seed: int, reach_at: int | None) -> dict[str, object]:
        ratios = [0.9] * 40 if reach_at is None else [0.9] * (reach_at - 1) + [1.0] * (41 - reach_at)
        return dict(
            method=method, family="needle", space="nccl", variant="needle#0", seed=seed, noise=0.04, ratios=ratios
        )

    runs = [r for seed in range(4) for r in (run("autotune", seed, 5), run("pipeline-random", seed, None))]
    cells = [c.strip() for c in goal_table(runs, 40).splitlines()[-1].strip("|").split("|")]
    assert cells[3] == "< 0.12 (pipeline-random's median >40)"
    flipped = [{**r, "method": "pipeline-random" if r["method"] == "autotune" else "autotune"} for r in runs]
    cells = [c.strip() for c in goal_table(flipped, 40).splitlines()[-1].strip("|").split("|")]
    assert cells[3] == "inf [inf, inf]"


@pytest.mark.parametrize("method", ["autotune", "grid"])
def test_every_method_gets_the_finalist_stage_it_is_asked_for(method: str) -> None:
    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "interactions", 0)
    run = run_method(land, family_optimum(land).value, method, seed=0, noise=0.04, launches=6, finalists=(2, 1))
    assert run["finalist_ratio"] is not None and run["finalist_launches"] >= 2


def test_a_finalist_stage_that_decides_nothing_is_judged_by_the_export_the_study_keeps() -> None:
    """Where no relaunch is clean the study exports the config chosen from the single launches
    (``autotune.export.best.apply_finalists``), not nothing; where no launch was feasible there is no stage and the
    export is worth 0, a number the paired finalist tables count (not None, which they leave out)."""
    from dataclasses import replace

    from benchmarks.search.drivers import Lab

    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "interactions", 0)
    best = family_optimum(land).value

    class Unclean(Lab):  # every relaunch measures over an SLO (configs at the edge, measured over it again)
        def measure(self, number: int, trial_id: str, params: dict[str, object]):  # type: ignore[no-untyped-def]
            rec = super().measure(number, trial_id, params)
            return replace(rec, feasible=False) if "-f1r" in trial_id else rec

    lab = Unclean(land, 0.0, 0, best)
    for i, p in enumerate([p for p in enumerate_points(land.spec) if land.evaluate(p).feasible][:4]):
        lab.record(i, f"t{i}", p)
    ratio, launches, method = lab.finalists(2, 2)
    assert method == "none" and launches == 4 and ratio == lab.ratios[-1] > 0
    assert Lab(land, 0.0, 0, best).finalists(2, 2) == (0.0, 0, "none")


def test_the_finalist_stage_relaunches_the_baseline_beside_the_top_configs_as_the_driver_does() -> None:
    """``autotune.study.driver`` relaunches the study's baseline (its first seed point) beside the top ``count``
    feasible configs where it completed outside them (``stage_finalists``); it can win there."""
    from benchmarks.search.drivers import Lab

    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "interactions", 0)
    best = family_optimum(land).value
    base = dict(land.spec.points_to_evaluate[0])
    floor = land.evaluate(base).objective
    better = [
        p for p in enumerate_points(land.spec) if land.evaluate(p).feasible and land.evaluate(p).objective > floor
    ]
    lab = Lab(land, 0.0, 0, best)
    for i, p in enumerate([base, *better[:2]]):
        lab.record(i, f"t{i}", p)
    assert lab.finalists(2, 2)[1] == 6  # the two better ones and the baseline, twice each


def test_the_seed_points_kept_for_last_are_launched_at_the_run_s_end() -> None:
    """A study whose budget is the run's 12 launches launches its two deferred seed points (a capped seed whose lifted
    twin runs, one predicted not to fit) as launches 11 and 12, as the searcher does with the study's own budget;
    random sampling's pipeline launches them with the other seeds."""
    from autotune.policy.prescreen import deferred_seeds

    land = FamilyLandscape(load_space("h200-tp1-speculative"), "plateau", 0)
    later = deferred_seeds(land.spec, land.sizes)
    assert len(later) == 2
    best = family_optimum(land).value
    run = run_method(land, best, "autotune", seed=0, noise=0.04, launches=12)
    assert list(run["launched"][-2:]) == later and all(p not in run["launched"][:-2] for p in later)
    other = run_method(land, best, "pipeline-random", seed=0, noise=0.04, launches=12)
    assert all(p in other["launched"][:6] for p in later)
