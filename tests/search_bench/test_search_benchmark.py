"""The search benchmark (benchmarks/search): landscapes, metrics, and a smoke run of every method."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.search.__main__ import load_space, main
from benchmarks.search.drivers import run_grid, run_searcher
from benchmarks.search.landscape import VARIANTS, Landscape, enumerate_points, optimum
from benchmarks.search.metrics import launches_to, ratio_at, summarize

pytestmark = pytest.mark.research  # the research harness: out of the fast lane (tests/conftest.py)


def test_enumeration_matches_the_sampler_shape() -> None:
    spec = load_space("speculative")
    points = enumerate_points(spec, float_points=4)
    off = [p for p in points if p["speculative_algorithm"] is None]
    assert len(off) == 5 * 4 and all(
        set(p) == {"speculative_algorithm", "max_running_requests", "mem_fraction_static"} for p in off
    )
    tree = [p for p in points if p.get("speculative_eagle_topk", 1) > 1]
    assert all("speculative_num_draft_tokens" in p for p in tree)


def test_landscape_outcomes_and_the_pruned_optimum_is_exact() -> None:
    spec = load_space("h200-tp1-speculative")
    land = Landscape(spec, VARIANTS[2])
    oom = land.evaluate({"speculative_algorithm": None, "max_running_requests": None, "mem_fraction_static": 0.01})
    assert oom.outcome == "failed" and oom.failure.value == "oom_at_launch" and oom.true_value == 0.0
    bad = land.evaluate(
        {
            "speculative_algorithm": "EAGLE3",
            "speculative_draft_model_path": "/tmp/models/eagle3-llama-1b",
            "speculative_num_steps": 4,
            "speculative_eagle_topk": 2,
            "speculative_num_draft_tokens": 4,
            "max_running_requests": 64,
            "mem_fraction_static": 0.82,
        }
    )
    assert bad.outcome == "invalid" and not bad.launched
    assert optimum(land).value == optimum(land, exhaustive=True).value > 0


def test_metrics() -> None:
    r = [0.5, 0.9, 0.99, 1.0]
    assert launches_to(r) == 3 and math.isinf(launches_to([0.5]))
    assert ratio_at(r, 2) == 0.9 and ratio_at(r, 40) == 1.0
    s = summarize([{"ratios": r}, {"ratios": [0.9] * 40}])
    assert s.reached == 0.5 and s.below_poor == 0.5 and s.regret[10] == pytest.approx(0.05)


def test_every_method_runs_and_judges_the_export_by_its_true_value() -> None:
    spec = load_space("h200-tp1-speculative")
    land = Landscape(spec, VARIANTS[0])
    best = optimum(land).value
    for run in (
        run_searcher(land, best, sampler="tpe", seed=0, noise=0.04, launches=6, slots=2),
        run_searcher(land, best, sampler="random", seed=0, noise=0.0, launches=6),
        run_grid(land, best, seed=0, noise=0.0, launches=6),
    ):
        assert len(run.ratios) == 6 and len(run.launched) == 6
        assert all(0.0 <= x <= 1.0 + 1e-9 for x in run.ratios)
        assert run.suggested >= 6 + run.invalid


def test_cli_smoke(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "--spaces",
                "h200-tp1-speculative",
                "--variants",
                "base",
                "--seeds",
                "1",
                "--noise",
                "0",
                "--launches",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    doc = json.loads(out.read_text())
    assert {r["method"] for r in doc["runs"]} == {"autotune", "random", "grid"} and doc["simulated"] is True
    assert "| pooled | autotune |" in capsys.readouterr().out


def test_variants_scale_slos_and_the_top_load_and_skip_no_op_drafter_variants() -> None:
    from benchmarks.search.landscape import vary_spec

    spec = load_space("nccl")
    by_name = {v.name: v for v in VARIANTS}
    tight = vary_spec(spec, by_name["tight-slo"])
    assert [c.max for c in tight.constraints] == [c.max * 0.8 for c in spec.constraints]
    high = Landscape(spec, by_name["high-load"])
    assert high.top == 256 and max(high.spec.plan.concurrencies) == 256
    assert not by_name["poor-drafter"].affects(spec) and by_name["poor-drafter"].affects(load_space("speculative"))
    assert by_name["base"].key() == (
        "Variant(name='base', accept_scale=1.0, allreduce_scale=1.0, mem_scale=1.0, "
        "per_seq_scale=1.0, accept_len=None, drafter_cost_scale=1.0)"
    )


def test_a_repaired_drafter_accepts_like_the_best_other_drafter_times_the_factor() -> None:
    from autotune.sim.profile import load_profile
    from benchmarks.search.landscape import perturb

    by_name = {v.name: v for v in VARIANTS}
    spec = load_space("speculative")
    base = {d.paths[0]: d for d in load_profile(spec.sim.profile).drafters}
    fixed = {d.paths[0]: d for d in perturb(load_profile(spec.sim.profile), by_name["fixed-drafter"]).drafters}
    public, custom = "lightseekorg/kimi-k2-eagle3", "custom-k25-eagle3"
    assert base[custom].accept_probs == (0.0,)  # the user's broken drafter
    assert fixed[custom].accept_probs == pytest.approx(tuple(p * 1.6 for p in base[public].accept_probs))
    assert fixed[public].accept_probs == base[public].accept_probs  # a working drafter keeps its acceptance
    assert fixed[custom].layer_floor_us == pytest.approx(0.4 * base[custom].layer_floor_us)
    assert not by_name["fixed-drafter"].affects(load_space("nccl"))  # drafters only: the base landscape again there
    assert "repaired_drafter=1.6" in by_name["fixed-drafter"].key()


def test_seed_launches_counts_the_leading_seed_points() -> None:
    from benchmarks.search.__main__ import seed_launches

    spec = load_space("h200-tp1-speculative")
    seeds = [dict(p) for p in spec.points_to_evaluate]
    other = {**seeds[0], "mem_fraction_static": 0.88}
    run = {"space": "h200-tp1-speculative", "variant": "base", "launched": [seeds[1], seeds[0], other, seeds[2]]}
    assert seed_launches(run) == 2
    s = summarize([{"ratios": [0.0, 0.5, 0.99], "seed_launches": 2}])
    assert s.median_launches == 3 and s.median_after_seeds == 1


def test_the_finalist_stage_after_the_budget_relaunches_the_top_configs_and_counts_them() -> None:
    """The study's export rule with its finalist stage: the top 3 feasible configs and the study's baseline (the first
    seed point, not among them here) relaunched twice each (8 launches counted apart from the budget), as the driver
    runs the stage; the winner decided from the relaunches and judged by its true value."""
    spec = load_space("h200-tp1-speculative")
    land = Landscape(spec, VARIANTS[0])
    best = optimum(land).value
    run = run_searcher(land, best, sampler="tpe", seed=1, noise=0.1, launches=8, finalists=(3, 2))
    assert len(run.ratios) == 8 and run.finalist_launches == 8
    assert run.finalist_method in ("separable", "tie", "single") and 0.0 < run.finalist_ratio <= 1.0 + 1e-9
    none = run_grid(land, best, seed=0, noise=0.0, launches=4)
    assert none.finalist_ratio is None and none.finalist_launches == 0


def test_the_searcher_never_launches_a_screened_point_nor_a_repeat_before_the_space_is_used_up() -> None:
    """The H200 space has 228 points, about a hundred worth a launch after the screen and the repair: 40 launches are
    40 distinct points, and no point predicted not to fit (mem_fraction_static 0.01, not a seed here) is launched.
    (Once a listed space is used up the rest of the budget re-measures measured points: tests/test_searcher.py.)"""
    spec = load_space("h200-tp1-speculative")
    land = Landscape(spec, VARIANTS[0])
    best = optimum(land).value
    run = run_searcher(land, best, sampler="tpe", seed=0, noise=0.04, launches=40)
    distinct = {json.dumps(p, sort_keys=True) for p in run.launched}
    assert len(run.ratios) == 40 and run.repeats == 40 - len(distinct) == 0
    seeds = [dict(p) for p in spec.points_to_evaluate]
    assert all(p.get("mem_fraction_static") != 0.01 or p in seeds for p in run.launched)
    assert summarize([run.to_json()]).mean_launches == 40


def test_an_export_rule_is_judged_on_the_runs_own_measurements() -> None:
    """The replay measures a run's launches again with the same noise stream: select_best's ratios come out as the
    run recorded them, so another rule is compared on the very same measurements."""
    from benchmarks.search.export_rules import RULES, replay, table

    spec = load_space("h200-tp1-speculative")
    land = Landscape(spec, VARIANTS[0])
    best = optimum(land).value
    run = run_searcher(land, best, sampler="tpe", seed=2, noise=0.04, launches=8).to_json()
    for name, rule in RULES.items():
        base, other = replay(run, land, rule)
        assert base == list(run["ratios"]), name
        assert len(other) == 8 and all(0.0 <= x <= 1.0 + 1e-9 for x in other), name
    row = {"space": run["space"], "variant": "base", "noise": 0.04, "seed": 2, "base": base, "other": base}
    assert "| 4% | pooled | 1 | other |" in table([row])


def test_rescore_rescales_every_share_of_the_optimum(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A corrected optimum (200 -> 100) doubles the run's ratios and its finalist export's, and says again whether a
    seed point is within 2% of it."""
    import benchmarks.search.__main__ as cli
    from benchmarks.search.landscape import Optimum

    monkeypatch.setattr(cli, "cached_optimum", lambda space, land: Optimum(100.0, {}, 0, 0))
    run = {
        "space": "h200-tp1-speculative",
        "variant": "base",
        "optimum": 200.0,
        "ratios": [0.25, 0.5],
        "finalist_ratio": 0.45,
        "seed_within_2pct": False,
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"runs": [run]}))
    assert main(["rescore", str(path)]) == 0
    got = json.loads(path.read_text())["runs"][0]
    assert got["optimum"] == 100.0 and got["ratios"] == [0.5, 1.0] and got["finalist_ratio"] == 0.9
    assert got["seed_within_2pct"]  # every seed point runs at thousands of tokens/s, far above 98 here
