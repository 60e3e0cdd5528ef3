"""Best selection, Pareto set, per-regime choices and the speculation crossover."""

from __future__ import annotations

from dataclasses import replace

import pytest

from autotune.export.analysis import analyze
from autotune.export.best import check_objectives, parse_load_levels, select_best
from autotune.export.errors import ExportError
from autotune.export.pareto import ParetoPoint, dominates, pareto_front
from autotune.export.regimes import crossover, eligible_at, regime_choices
from autotune.space import Objective
from autotune.trial.records import FailureKind, TrialOutcome
from tests.export.conftest import make_record, study_records


def test_best_is_feasible_with_best_primary_objective(records, objectives):
    choice = select_best(records, check_objectives(objectives))
    assert choice.record is not None and choice.record.number == 0
    assert choice.value == 2370


def test_infeasible_trial_with_higher_objective_is_not_best(record_factory, records, objectives):
    huge = record_factory(9, tputs={1: 100, 128: 9000}, constraints={"ttft_ms.p99@max": 1.0})
    choice = select_best([*records, huge], check_objectives(objectives))
    assert choice.record is not None and choice.record.number == 0


def test_minimize_direction_and_ties_go_to_earlier_trial(record_factory):
    recs = [record_factory(n, tputs={1: 10, 8: t}) for n, t in [(3, 50.0), (1, 40.0), (2, 40.0)]]
    choice = select_best(recs, check_objectives([Objective("output_tok_per_s", "max", "minimize")]))
    assert choice.record is not None and choice.record.number == 1


def test_no_feasible_trial_gives_reason(record_factory):
    recs = [
        record_factory(0, tputs={1: 10, 8: 50}, constraints={"ttft_ms.p99@max": 3.0}),
        record_factory(1, outcome=TrialOutcome.FAILED, failure=FailureKind.OOM_AT_LAUNCH),
    ]
    choice = select_best(recs, check_objectives([Objective("output_tok_per_s", "max", "maximize")]))
    assert choice.record is None
    assert "no feasible trial among 2" in choice.reason
    assert "ttft_ms.p99@max in 1" in choice.reason
    assert "oom_at_launch: 1" in choice.reason


@pytest.mark.parametrize(
    "objectives, fix",
    [
        ([], "at least one"),
        ([Objective("x", "max", "up")], "'maximize' or 'minimize'"),  # type: ignore[arg-type]  # a bad direction
        ([("x@max", "maximize")], "not an autotune.space.Objective"),
    ],
)
def test_bad_objectives_raise_with_fix(objectives, fix):
    with pytest.raises(ExportError, match=fix):
        check_objectives(objectives)


@pytest.mark.parametrize("levels", [[], [0, 8], [1.5], [True]])
def test_bad_load_levels_raise(levels):
    with pytest.raises(ExportError, match="load levels|concurrencies"):
        parse_load_levels(levels)


def test_pareto_excludes_dominated_and_infeasible(records, levels):
    front = pareto_front(records, levels)
    assert [p.number for p in front.front] == [4, 0]  # sorted by latency
    assert sorted(p.number for p in front.dominated) == [2, 3]
    assert 1 not in {p.number for p in (*front.front, *front.dominated)}  # infeasible
    assert [(a.objective.key, a.level) for a in front.axes] == [
        ("tpot_ms.median@min", 1),
        ("output_tok_per_s@max", 128),
    ]
    assert front.front[0].params["max-running-requests"] == 128


def test_dominates_and_equal_points_are_both_kept(record_factory):
    def pt(n: int, tput: float, lat: float) -> ParetoPoint:
        return ParetoPoint(n, f"t{n}", (lat, tput), False, {}, {})

    axes = pareto_front([], (1, 8)).axes
    assert dominates(pt(0, 10, 1), pt(1, 9, 1), axes)
    assert not dominates(pt(0, 10, 1), pt(1, 10, 1), axes)
    assert not dominates(pt(0, 10, 2), pt(1, 9, 1), axes)
    twins = [record_factory(n, tputs={1: 5, 8: 100}, tpots={1: 7.0}) for n in (0, 1)]
    assert [p.number for p in pareto_front(twins, (1, 8)).front] == [0, 1]


def test_no_regime_recommends_a_config_that_misses_a_study_constraint(records, levels):
    spec_over_slo = records[1]
    assert not spec_over_slo.feasible
    assert not eligible_at(spec_over_slo, 1, levels)  # fastest at low load, but it misses the SLO at 128
    assert not eligible_at(spec_over_slo, 128, levels)
    for choice in regime_choices(records, levels):
        assert choice.record is None or choice.record.feasible
    assert not eligible_at(records[5], 1, levels)  # failed


def test_level_with_failed_requests_is_not_eligible(record_factory):
    rec = record_factory(0, tputs={1: 10, 8: 50})
    bench = rec.bench
    assert bench is not None
    broken = replace(bench.levels[1], failed=2)
    rec2 = replace(rec, bench=replace(bench, levels=(bench.levels[0], broken)))
    assert eligible_at(rec2, 1, (1, 8)) and not eligible_at(rec2, 8, (1, 8))


def test_regime_choice_per_level(levels):
    records = study_records(window_pct=2.0)
    chosen = {c.concurrency: c for c in regime_choices(records, levels)}
    assert chosen[1].record is not None and chosen[1].record.number == 4
    assert chosen[8].record is not None and chosen[8].record.number == 4
    assert chosen[32].record is not None and chosen[32].record.number == 0
    assert chosen[128].record is not None and chosen[128].record.number == 0 and chosen[128].globally_feasible


def test_crossover_where_speculation_stops_winning(levels):
    records = study_records(window_pct=2.0)
    cx = crossover(records, levels)
    assert (cx.last_spec_win, cx.stops_winning_at) == (8, 32)
    wins = [c.spec_wins for c in cx.comparisons]
    assert wins == [True, True, False, False]
    assert cx.comparisons[0].spec is not None and cx.comparisons[0].spec.number == 4
    assert cx.comparisons[3].spec is not None and cx.comparisons[3].spec.number == 4  # #1 misses the SLO at 128
    assert "up to concurrency 8" in cx.summary and "from concurrency 32" in cx.summary


def test_crossover_when_speculation_never_or_always_wins(record_factory):
    plain = record_factory(0, tputs={1: 50, 8: 300}, window_pct=2.0)
    slow_spec = record_factory(1, tputs={1: 40, 8: 200}, flags={"speculative-algorithm": "NGRAM"}, window_pct=2.0)
    fast_spec = record_factory(2, tputs={1: 90, 8: 400}, flags={"speculative-algorithm": "NGRAM"}, window_pct=2.0)
    never = crossover([plain, slow_spec], (1, 8))
    assert never.stops_winning_at is None and "never beats" in never.summary
    always = crossover([plain, fast_spec], (1, 8))
    assert always.stops_winning_at is None and "every compared load level" in always.summary
    assert "No speculative trial" in crossover([plain], (1, 8)).summary


def test_off_algorithm_value_counts_as_no_speculation(record_factory):
    """Off is an omitted flag (None or False), the one idea of off in autotune.engines.sglang_facts."""
    off = record_factory(0, tputs={1: 50, 8: 300}, flags={"speculative-algorithm": None})
    false = record_factory(1, tputs={1: 40, 8: 200}, flags={"speculative-algorithm": False})
    assert "No speculative trial" in crossover([off, false], (1, 8)).summary


def _scored(number: int, objectives: dict[str, float], **kw):  # type: ignore[no-untyped-def]
    """A record whose study objectives are ``objectives``; its peak throughput and TPOT at the lowest level say
    the opposite (trial 2 is best on both), so a front on those is told apart from one on the objectives."""
    peak, tpot = {0: (100.0, 20.0), 1: (200.0, 15.0), 2: (900.0, 5.0), 3: (1000.0, 1.0)}[number]
    return replace(make_record(number, tputs={1: 10.0, 8: peak}, tpots={1: tpot}, **kw), objectives=objectives)


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_multi_objective_pareto_set_is_on_the_study_objectives(direction):
    """An NSGA-II study on TPOT at 8 and TTFT p99 at the peak: its front is on those, in their directions; the
    throughput-vs-TPOT view is for single-objective studies. Infeasible trials stay out."""
    sign = 1.0 if direction == "minimize" else -1.0
    objectives = [Objective("tpot_ms.median", 8, direction), Objective("ttft_ms.p99", "max", "minimize")]
    recs = [
        _scored(0, {"tpot_ms.median@8": sign * 5.0, "ttft_ms.p99@max": 300.0}),
        _scored(1, {"tpot_ms.median@8": sign * 9.0, "ttft_ms.p99@max": 100.0}),
        _scored(2, {"tpot_ms.median@8": sign * 10.0, "ttft_ms.p99@max": 400.0}),  # dominated by both
        _scored(3, {"tpot_ms.median@8": sign * 1.0, "ttft_ms.p99@max": 1.0}, constraints={"ttft_ms.p99@max": 1.0}),
    ]
    front = analyze(study_name="s", objectives=objectives, records=recs, load_levels=(1, 8)).pareto
    assert [p.number for p in front.front] == [0, 1]  # by the primary objective, best first
    assert [p.number for p in front.dominated] == [2]
    assert [(a.objective.key, a.level) for a in front.axes] == [("tpot_ms.median@8", 8), ("ttft_ms.p99@max", 8)]
    assert front.front[1].values == (sign * 9.0, 100.0)
    single = analyze(study_name="s", objectives=objectives[:1], records=recs, load_levels=(1, 8)).pareto
    assert [p.number for p in single.front] == [2]  # throughput at 8 vs TPOT median at 1
