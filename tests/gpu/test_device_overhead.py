"""tools/device/overhead.py on hand-made trial records (CPU only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.trial.records import FailureKind, PhaseTimings, TrialOutcome, TrialRecord
from tools.device.overhead import main, span_and_gaps, summarize, trial_overhead


def rec(
    number: int,
    start: str,
    end: str,
    outcome: TrialOutcome = TrialOutcome.COMPLETE,
    failure: FailureKind | None = None,
    **phases: float,
) -> TrialRecord:
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={},
        flags={},
        env={},
        argv=[],
        outcome=outcome,
        failure=failure,
        phases=PhaseTimings(**phases),
        started_at=f"2026-12-01T10:{start}+00:00",
        finished_at=f"2026-12-01T10:{end}+00:00",
    )


RECORDS = [
    rec(0, "00:00", "01:40", trial_wall_s=100, launch_to_ready_s=60, bench_s=30, deploy_to_ready_s=65, teardown_s=4),
    rec(1, "01:50", "01:50", TrialOutcome.INVALID, FailureKind.INVALID_CONFIG),  # rejected before launch
    rec(2, "02:00", "02:50", trial_wall_s=50, launch_to_ready_s=40, bench_s=9, deploy_to_ready_s=40.5, teardown_s=0.3),
    rec(
        3,
        "02:50",
        "03:35",
        TrialOutcome.FAILED,
        FailureKind.OOM_AT_LAUNCH,
        trial_wall_s=45,
        deploy_to_ready_s=44,
        teardown_s=1,
    ),
]


def test_one_trial_split() -> None:
    t = trial_overhead(RECORDS[0])
    assert not isinstance(t, str)
    assert t.outside_s == pytest.approx(10) and t.share == pytest.approx(0.10)
    assert (t.deploy_s, t.teardown_s, t.rest_s) == (pytest.approx(5), pytest.approx(4), pytest.approx(1))


def test_trial_without_timings_says_why() -> None:
    why = trial_overhead(RECORDS[3])
    assert isinstance(why, str) and "launch_to_ready_s" in why and "oom_at_launch" in why


def test_summary_totals_skips_and_goal() -> None:
    s = summarize(RECORDS)
    assert [t.number for t in s.trials] == [0, 2]
    assert len(s.skipped) == 2 and s.skipped[0].startswith("#1 t1: no trial_wall_s")
    assert s.wall_s == pytest.approx(150) and s.outside_s == pytest.approx(11)
    assert s.share == pytest.approx(11 / 150)  # weighted by wall time, not a mean of shares
    assert s.deploy_s == pytest.approx(5.5) and s.teardown_s == pytest.approx(4.3) and s.rest_s == pytest.approx(1.2)
    assert s.meets_goal is False
    assert summarize(RECORDS, goal=0.08).meets_goal is True
    assert s.span_s == pytest.approx(215) and s.uncovered_s == pytest.approx(20)  # 01:40-02:00 had no trial


def test_concurrent_trials_leave_no_gap_and_empty_study_has_no_share() -> None:
    both = [rec(0, "00:00", "01:00"), rec(1, "00:30", "01:30")]
    assert span_and_gaps(both) == (pytest.approx(90), pytest.approx(0))
    empty = summarize([RECORDS[1]])
    assert empty.share is None and empty.meets_goal is None and empty.trials == ()


def test_cli_reads_the_store_last_record_wins(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = tmp_path / "results" / "s"
    study.mkdir(parents=True)
    stale = rec(2, "02:00", "02:50", trial_wall_s=500, launch_to_ready_s=40, bench_s=9)  # superseded by the next line
    lines = [json.dumps(r.to_json()) for r in [RECORDS[0], stale, *RECORDS[1:]]]
    (study / "trials.jsonl").write_text("\n".join(lines) + '\n{"torn": ')
    assert main([str(study), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["wall_s"] == pytest.approx(150) and data["meets_goal"] is False
    assert [t["number"] for t in data["trials"]] == [0, 2]
    assert main([str(study / "trials.jsonl")]) == 0
    table = capsys.readouterr().out
    assert "MISSES the goal of at most 3.0%" in table and "7.3%" in table and "skipped #3 t3" in table


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope")]) == 2
    assert "not found" in capsys.readouterr().err
    (tmp_path / "trials.jsonl").write_text("")
    assert main([str(tmp_path)]) == 2
    assert "no trial records" in capsys.readouterr().err
