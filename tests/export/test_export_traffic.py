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
