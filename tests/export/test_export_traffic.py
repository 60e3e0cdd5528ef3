"""Rate levels in the per-regime answer (ranked by goodput), constraints naming them, and the Traffic section."""

from __future__ import annotations

import dataclasses

from autotune.bench.types import BenchResult, Lateness, TrafficStats
from autotune.export.regimes import eligible_at, open_level_keys, regime_choices
from autotune.export.traffic import traffic_section
from autotune.trial.records import TrialRecord
from tests.export.conftest import level, make_record

TRAFFIC = TrafficStats(100, 250.0, 120.0, 900.0, 200.0, 140.0, 800.0, 0.25)


def with_rate(rec: TrialRecord, tput: float, goodput: float, *, workload: dict | None = None) -> TrialRecord:
    assert rec.bench is not None
    rate = dataclasses.replace(
        level(0, tput),
        load="rate8",
        goodput=goodput,
        slo_attainment=goodput / 8,
        traffic=TRAFFIC,
        lateness=Lateness(0.001, 0.004, 0.01, 0),
        offered_rate=7.9,
    )
    bench = BenchResult(levels=(*rec.bench.levels, rate), workload=workload)
    return dataclasses.replace(rec, bench=bench)


def test_the_rate_level_is_a_regime_ranked_by_goodput() -> None:
    a = with_rate(make_record(1, tputs={1: 100.0, 8: 500.0}), tput=1500.0, goodput=5.0)
    b = with_rate(make_record(2, tputs={1: 120.0, 8: 400.0}), tput=1490.0, goodput=7.5)  # fewer tokens, more good
    records = [a, b]
    assert open_level_keys(records) == ("rate8",)
    chosen = {c.concurrency: c for c in regime_choices(records, (1, 8), open_levels=open_level_keys(records))}
    assert list(chosen) == [1, 8, "rate8"]
    assert chosen[1].record is b and chosen[8].record is a
    assert chosen["rate8"].record is b and chosen["rate8"].goodput == 7.5


def test_a_constraint_names_a_rate_level_and_a_config_missing_it_is_recommended_nowhere() -> None:
    rec = with_rate(make_record(1, tputs={1: 100.0, 8: 500.0}, constraints={"goodput@rate8": 1.0}), 1000.0, 2.0)
    assert not eligible_at(rec, "rate8", (1, 8))
    assert not eligible_at(rec, 8, (1, 8))  # a regime never recommends a config the study's constraints rule out
    ok = with_rate(make_record(2, tputs={1: 100.0, 8: 500.0}, constraints={"goodput@rate8": -1.0}), 1000.0, 2.0)
    assert eligible_at(ok, "rate8", (1, 8)) and eligible_at(ok, 8, (1, 8))


def test_traffic_section_for_dataset_workloads_only() -> None:
    plain = make_record(1, tputs={1: 100.0})
    assert traffic_section([plain]) == []
    rec = with_rate(
        make_record(1, tputs={1: 100.0}),
        1000.0,
        2.0,
        workload={"kind": "sharegpt", "token_rule": "chars/4", "kept": 120, "dropped": {"empty": 3}},
    )
    text = "\n".join(traffic_section([rec]))
    assert (
        "Workload `sharegpt`, tokens counted by chars/4; 120 entries passed its filters so far, dropped: empty 3"
        in text
    )
    assert "| rate8 | 100 | 250 / 120 / 900 | 200 / 140 / 800 | 25.0% | 7.90 | 4.0 |" in text


def test_a_primary_objective_at_a_rate_level_is_judged_there_on_its_own_metric() -> None:
    """``goodput@rate8`` as the primary objective: the export used to stop with ``ValueError: invalid literal for
    int() ... 'rate8'``; the verdict is decided on goodput at the rate level, not on another metric elsewhere."""
    from autotune.export.analysis import analyze
    from autotune.space import Objective

    base = with_rate(make_record(0, tputs={1: 100.0, 8: 400.0}, params={"x": 0}), tput=1500.0, goodput=7.0)
    best = with_rate(make_record(1, tputs={1: 100.0, 8: 800.0}, params={"x": 1}), tput=1500.0, goodput=7.7)
    base = dataclasses.replace(base, objectives={"goodput@rate8": 7.0})
    best = dataclasses.replace(best, objectives={"goodput@rate8": 7.7})
    objectives = [Objective("goodput", "rate8", "maximize")]
    a = analyze(study_name="demo", objectives=objectives, records=[base, best], load_levels=(1, 8), baseline={"x": 0})
    v = a.verdict
    assert v is not None and v.baseline == 0 and v.recommended == 1
    assert "`goodput@rate8`" in v.headline and "+10.0%" in v.headline  # goodput's gain at 8 req/s
    assert "+100" not in v.headline  # not output tok/s' gain at concurrency 8


def test_a_goodput_objective_at_a_concurrency_is_judged_on_goodput() -> None:
    """``goodput@max``: the headline named the objective but stated output tok/s' gain at that level."""
    from autotune.export.analysis import analyze
    from autotune.space import Objective

    base = make_record(0, tputs={1: 100.0, 8: 400.0}, params={"x": 0})
    best = make_record(1, tputs={1: 100.0, 8: 800.0}, params={"x": 1})
    base = dataclasses.replace(base, bench=_with_goodput(base, 8, 7.0), objectives={"goodput@max": 7.0})
    best = dataclasses.replace(best, bench=_with_goodput(best, 8, 7.7), objectives={"goodput@max": 7.7})
    objectives = [Objective("goodput", "max", "maximize")]
    a = analyze(study_name="demo", objectives=objectives, records=[base, best], load_levels=(1, 8), baseline={"x": 0})
    v = a.verdict
    assert v is not None and v.recommended == 1 and "`goodput@max` (concurrency 8)" in v.headline
    assert "+10.0%" in v.headline and "+100" not in v.headline  # goodput's gain, not output tok/s'


def _with_goodput(rec: TrialRecord, concurrency: int, goodput: float) -> BenchResult:
    assert rec.bench is not None
    levels = tuple(
        dataclasses.replace(lv, goodput=goodput) if lv.concurrency == concurrency else lv for lv in rec.bench.levels
    )
    return dataclasses.replace(rec.bench, levels=levels)


def test_the_report_header_names_the_open_loop_levels_too() -> None:
    """``report.md``'s header listed only the concurrencies ("Load levels (concurrency): 1, 8") of a study that also
    measured a rate level."""
    from autotune.export.analysis import analyze
    from autotune.export.report import render_report
    from autotune.space import Objective

    recs = [with_rate(make_record(n, tputs={1: 100.0, 8: 400.0 + n}, params={"x": n}), 1500.0, 7.0) for n in (0, 1)]
    objectives = [Objective("output_tok_per_s", "max", "maximize")]
    header = render_report(analyze(study_name="demo", objectives=objectives, records=recs, load_levels=(1, 8)))
    assert "Load levels (concurrency): 1, 8; open loop: rate8." in header
    plain = [make_record(n, tputs={1: 100.0, 8: 400.0 + n}, params={"x": n}) for n in (0, 1)]
    header = render_report(analyze(study_name="demo", objectives=objectives, records=plain, load_levels=(1, 8)))
    assert "Load levels (concurrency): 1, 8." in header


def test_the_launch_script_header_gives_the_open_loop_levels_figures_too() -> None:
    """``launch.sh``'s header gave figures for the concurrencies only, not for a rate level the study measured."""
    from autotune.export.launch_script import render_launch_script

    rec = with_rate(make_record(0, tputs={1: 100.0, 8: 400.0}, params={"x": 0}), 1500.0, 7.0)
    text = render_launch_script(rec, study_name="demo", load_levels=(1, 8))
    assert "# Concurrency 8: 400.0 output tok/s" in text
    assert "# 8 req/s: 1,500.0 output tok/s" in text
