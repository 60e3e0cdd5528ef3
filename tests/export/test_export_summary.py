"""The terminal summary table."""

from __future__ import annotations

from autotune.export import format_summary_table


def test_summary_table_marks_best_and_aligns(records, objectives, levels):
    text = format_summary_table(records, objectives, levels)
    lines = text.splitlines()
    assert lines[0].startswith("Engine: SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement")
    header = lines[1]
    for col in ("trial", "outcome", "params", "output_tok_per_s@max", "ttft_ms.p99@max", "feasible"):
        assert col in header
    rows = lines[3:-1]
    assert len(rows) == len(records)
    best_rows = [r for r in rows if r.startswith("*")]
    assert len(best_rows) == 1 and "2370.00" in best_rows[0]
    outcome_col = header.index("outcome")
    assert all(r[outcome_col - 1] == " " and r[outcome_col] != " " for r in rows)  # left-aligned, same column
    assert "failed:oom_at_launch" in text and "invalid:invalid_config" in text
    assert lines[-1] == "* best: trial 0 (output_tok_per_s@max = 2370.00, maximize)"


def test_summary_without_feasible_trial(record_factory, objectives, levels):
    rec = record_factory(0, tputs={1: 10, 128: 20}, constraints={"ttft_ms.p99@max": 1.0})
    text = format_summary_table([rec], objectives, levels)
    assert "no best trial: no feasible trial among 1" in text
    assert not any(line.startswith("*") for line in text.splitlines())


def test_summary_keeps_long_speculative_params_whole(record_factory, objectives, levels):
    params = {
        "speculative_algorithm": "EAGLE3",
        "speculative_draft_model_path": "lmsys/SGLang-EAGLE3-Llama-3.1-8B-Instruct",
        "speculative_num_steps": 5,
        "speculative_eagle_topk": 8,
        "speculative_num_draft_tokens": 32,
        "max_running_requests": 128,
    }
    rec = record_factory(0, tputs={1: 10, 128: 20}, params=params)
    text = format_summary_table([rec], objectives, levels)
    row = text.splitlines()[3]
    for key, value in params.items():
        assert f"{key}={value}" in row, row
    assert "…" not in text


def test_an_objective_at_min_or_at_a_rate_level_keeps_its_interval_beside_an_open_loop_level(record_factory):
    """An open-loop level's concurrency is 0: `@min` looked up level 0 (none) and `@rate8` was skipped, so the table
    showed those objectives without the ± their windows measured."""
    from dataclasses import replace

    from autotune.space import Objective
    from tests.export.conftest import level

    rec = record_factory(0, tputs={1: 50, 8: 400}, window_pct=3)
    rate = replace(level(0, 300, window_pct=4), load="rate8")
    rec = replace(
        rec,
        bench=replace(rec.bench, levels=(*rec.bench.levels, rate)),
        objectives={"output_tok_per_s@min": 50.0, "output_tok_per_s@rate8": 300.0},
    )
    objectives = [Objective("output_tok_per_s", "min", "maximize"), Objective("output_tok_per_s", "rate8", "maximize")]
    row = format_summary_table([rec], objectives, [1, 8]).splitlines()[3]
    assert "50.00 ±3.0%" in row and "300.00 ±4.0%" in row


def test_a_failed_trial_shows_no_objective_figures_not_the_samplers_stand_in(record_factory):
    """A failed or invalid trial's record holds the worst value for the sampler (0 tok/s; 1e12 ms for a latency): the
    table showed '1000000000000.00' and '0.00' beside it, as if measured."""
    from dataclasses import replace

    from autotune.export.analysis import analyze
    from autotune.export.report import render_report
    from autotune.space import Objective
    from autotune.trial.records import FailureKind, TrialOutcome
    from autotune.trial.score import failed_score

    objectives = [Objective("ttft_ms.p99", "max", "minimize"), Objective("output_tok_per_s", "max", "maximize")]
    failed = record_factory(1, outcome=TrialOutcome.FAILED, failure=FailureKind.OOM_AT_LAUNCH, message="oom")
    records = [
        record_factory(0, tputs={1: 50, 8: 400}),
        replace(failed, objectives=failed_score(objectives, []).objectives),
    ]
    text = format_summary_table(records, objectives, [1, 8])
    row = next(line for line in text.splitlines() if "oom_at_launch" in line)
    assert "1000000000000" not in row and "0.00" not in row
    report = render_report(analyze(study_name="d", objectives=objectives, records=records, load_levels=[1, 8]))
    assert "1000000000000" not in report
