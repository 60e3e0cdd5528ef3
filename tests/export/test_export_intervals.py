"""The report and the terminal summary print each figure's 95% interval beside it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotune.bench.metrics import aggregate_windows
from autotune.bench.types import BenchResult, LevelSummary
from autotune.export import export_study, format_summary_table


def test_intervals_beside_figures(tmp_path: Path, record_factory, objectives, levels) -> None:  # noqa: ANN001
    rec = record_factory(0, tputs={c: 1000.0 for c in levels})
    plain = record_factory(1, tputs={c: 900.0 for c in levels})
    base = rec.bench.levels
    # at every level, windows of 1000, 1100, 1200 tok/s: mean 1100, sd 100, half-width 4.303 * 100 / sqrt(3) = 248.4,
    # i.e. ±22.6% of the mean
    agg: list[LevelSummary] = [
        aggregate_windows(lv.concurrency, [replace(lv, output_tok_per_s=t) for t in (1000.0, 1100.0, 1200.0)], "max")
        for lv in base
    ]
    rec = replace(
        rec, bench=BenchResult(levels=tuple(agg)), objectives={**rec.objectives, "output_tok_per_s@max": 1100.0}
    )
    text = format_summary_table([rec, plain], objectives, levels)
    assert "1100.00 ±22.6%" in text and "900.00 ±" not in text
    assert "95% interval" in text
    export_study(tmp_path, study_name="demo", objectives=objectives, records=[rec, plain], load_levels=levels)
    report = (tmp_path / "best" / "report.md").read_text()
    assert "1,100.0 ±22.6%" in report and "95% Student-t" in report
