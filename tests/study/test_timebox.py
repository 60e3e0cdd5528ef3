"""The time box (``--stop-after-s``) against the finalist stage: its reserve, when it cannot hold the stage, and what
the study says."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotune.space import FinalistsSpec, load_study
from autotune.study.timebox import TimeBox, stage_launches

SMOKE = Path(__file__).resolve().parents[2] / "autotune" / "search_spaces" / "smoke.yaml"


def test_the_stage_launches_the_finalists_and_the_baseline_each_round() -> None:
    spec = load_study(SMOKE)
    assert stage_launches(spec) == (spec.finalists.count + 1) * spec.finalists.rounds
    assert stage_launches(replace(spec, finalists=FinalistsSpec(count=0))) == 0


def test_the_reserve_is_the_median_trial_times_the_rounds_of_relaunches() -> None:
    box = TimeBox(stop_after_s=1000.0, launches=8, at_once=3)
    assert box.reserve_s() == 0.0  # no trial finished yet
    assert box.add_trial(10.0) == ""  # 10 + 10 x ceil(8 / 3) = 40 s fits in 1000 s
    box.add_trial(30.0)
    box.add_trial(20.0)
    assert box.reserve_s() == 20.0 * 3
    assert "(now 60 s)" in box.start_text()


def test_a_box_too_short_for_the_stage_says_so_once_and_reserves_nothing() -> None:
    box = TimeBox(stop_after_s=60.0, launches=8)
    said = box.add_trial(10.0)  # 10 + 80 s > 60 s
    assert "cannot hold the finalist stage" in said and "Give at least 135 s" in said
    assert box.add_trial(10.0) == "" and box.check() == ""
    assert box.reserve_s() == 0.0
    assert "kept for the finalist stage" not in box.stopped_note(3, 12) and "3 of 12" in box.stopped_note(3, 12)


def test_no_box_or_no_stage_says_nothing() -> None:
    assert TimeBox(stop_after_s=None, launches=8).start_text() == ""
    assert TimeBox(stop_after_s=60.0, launches=0).add_trial(100.0) == ""


def test_only_complete_trials_estimate_a_relaunch(tmp_path: Path) -> None:
    """Most launches failing in 2 s beside complete ones of 8 s: the median of every trial's wall (2 s) reserved a
    quarter of the finalist stage's time, and the stage ran past --stop-after-s."""
    import io

    from autotune.progress.console import Console
    from autotune.study.driver import StudyDriver
    from autotune.trial.records import FailureKind, PhaseTimings, TrialOutcome, TrialRecord

    spec = load_study(SMOKE)
    driver = StudyDriver(spec, results_dir=tmp_path, stop_after_s=1000.0, console=Console(out=io.StringIO()))

    def rec(number: int, ok: bool, wall: float) -> TrialRecord:
        outcome, failure = (TrialOutcome.COMPLETE, None) if ok else (TrialOutcome.FAILED, FailureKind.OOM_AT_LAUNCH)
        return TrialRecord(spec.name, f"t{number}", number, {}, {}, {}, [], outcome, failure,
                           phases=PhaseTimings(trial_wall_s=wall))  # fmt: skip

    for k, (ok, wall) in enumerate([(True, 8.0), (False, 2.0), (False, 2.0), (False, 2.0), (True, 9.0)]):
        driver._on_record(rec(k, ok, wall), "")
    assert driver.timebox.trial_walls == [8.0, 9.0]
    assert driver.timebox.reserve_s() == 9.0 * stage_launches(spec)


def test_the_console_eta_knows_when_the_box_starts_its_last_trial(tmp_path: Path) -> None:
    """The searcher starts no trial once the finalist stage's reserve would pass the box's end; the console's ETA is
    told the same moment, and follows the reserve as trials finish."""
    import io

    from autotune.progress.console import Console
    from autotune.study.driver import StudyDriver
    from autotune.trial.records import PhaseTimings, TrialOutcome, TrialRecord

    spec = load_study(SMOKE)
    driver = StudyDriver(spec, results_dir=tmp_path, stop_after_s=1000.0, console=Console(out=io.StringIO()))
    driver._box_end = 5000.0  # what the search's start sets: now + what is left of --stop-after-s
    driver.console.study_started(40, 1, start_until=driver._start_until())
    assert driver.console.start_until == 5000.0  # nothing measured yet: nothing reserved
    record = TrialRecord(
        spec.name, "t0", 0, {}, {}, {}, [], TrialOutcome.COMPLETE, phases=PhaseTimings(trial_wall_s=8.0)
    )
    driver._on_record(record, "")
    assert driver.console.start_until == 5000.0 - 8.0 * stage_launches(spec)


def test_finalists_only_runs_the_stage_the_time_box_skipped(tmp_path: Path) -> None:
    """A box too short for the stage says "rerun ... --finalists-only to run it"; the same command with --finalists-only
    skipped the stage again, saying the same (the time box bounds the search, and --finalists-only runs none)."""
    import io

    from autotune.progress.console import Console
    from autotune.study.driver import StudyDriver

    out = io.StringIO()
    spec = load_study(SMOKE)
    driver = StudyDriver(spec, results_dir=tmp_path, stop_after_s=3.0, console=Console(out=out), finalists_only=True)
    driver.timebox.trial_walls = [7.0]  # the stored trials' walls, as the driver sets them before the stage
    assert driver.timebox.start_text() == "" and driver.timebox.check() == ""
    driver._run_finalists(1)  # no record: no stage is due, and nothing is skipped
    assert "skipped" not in out.getvalue(), out.getvalue()


def test_the_box_counts_from_the_commands_start(tmp_path: Path) -> None:
    """The box started only once Ray and Serve were up: on a cluster slow to start, the run overran
    --stop-after-s by the start-up time. It now counts from the command's start; one spent before the search starts
    lets no trial start (a box of 0 would be none)."""
    from autotune.study.driver import StudyDriver

    driver = StudyDriver(load_study(SMOKE), results_dir=tmp_path, stop_after_s=100.0)
    driver._started -= 40.0  # Ray and Serve took 40 s to start
    assert driver._box_left() == pytest.approx(60.0, abs=1.0)
    driver._started -= 100.0
    left = driver._box_left()
    assert left is not None and 0 < left < 0.01
    assert StudyDriver(load_study(SMOKE), results_dir=tmp_path)._box_left() is None
