"""The operator's console: start lines (n of N, params), phases, the ETA, quiet/verbose, the terminal status line,
and Ray's own output kept out of the console (a log file instead)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.progress.console import Console, Verbosity
from autotune.progress.eta import eta_seconds, fmt_duration
from autotune.progress.events import Phase, TrialEvent
from autotune.progress.monitor import RELAUNCH, TRIAL, RunningTable
from autotune.trial.records import PhaseTimings, TrialOutcome, TrialRecord


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _record(number: int, wall: float) -> TrialRecord:
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={"x": number},
        flags={},
        env={},
        argv=[],
        outcome=TrialOutcome.COMPLETE,
        objectives={"tok@max": 100.0 + number},
        feasible=True,
        phases=PhaseTimings(trial_wall_s=wall),
    )


def test_eta_from_measured_trials_and_concurrency() -> None:
    assert eta_seconds(trial_s=[], running_elapsed=[5.0], to_start=3, concurrency=2) is None
    # two slots, each trial 10 s: one running 4 s in (6 s left), one free; 3 to start -> 6+10=16 and 0+10+10=20
    assert eta_seconds(trial_s=[10.0], running_elapsed=[4.0], to_start=3, concurrency=2) == 20.0
    # one slot: the queue is serial
    assert eta_seconds(trial_s=[8.0, 12.0], running_elapsed=[], to_start=3, concurrency=1) == 30.0
    # a trial running longer than the mean counts as about to finish, never negative
    assert eta_seconds(trial_s=[10.0], running_elapsed=[25.0], to_start=0, concurrency=1) == 0.0
    assert fmt_duration(59) == "59s" and fmt_duration(125) == "2m05s" and fmt_duration(3 * 3600 + 60) == "3h01m"


def test_log_mode_prints_a_line_per_event_with_n_of_n_and_eta() -> None:
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=False, clock=clock)
    c.study_started(planned=3, concurrency=1)
    c.on_event(TrialEvent(0, "t0", Phase.STARTED, at=clock.t, params={"mem": 0.8, "spec": "EAGLE3"}))
    c.on_event(TrialEvent(0, "t0", Phase.LAUNCHING, at=clock.t))
    clock.t += 12
    c.on_event(TrialEvent(0, "t0", Phase.READY, at=clock.t, seconds=12.04))
    c.on_event(TrialEvent(0, "t0", Phase.BENCHMARKING, at=clock.t, level=2, levels=3, concurrency=8))
    c.on_event(TrialEvent(0, "t0", Phase.TEARING_DOWN, at=clock.t))
    clock.t += 8
    c.on_record(_record(0, 20.0))
    c.on_event(TrialEvent(0, "t0", Phase.TEARING_DOWN, at=clock.t))  # a late event of a finished trial: ignored
    c.on_event(TrialEvent(1, "t1", Phase.STARTED, at=clock.t, params={"mem": 0.7}))
    text = out.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and "\x1b" not in text  # a log gets plain lines
    assert "trial   0 started [1/3]  mem=0.8, spec=EAGLE3  (ETA after the first trial)" in lines[0]
    assert lines[1].endswith("trial   0 launching the engine")
    assert lines[2].endswith("trial   0 ready after 12.0 s")
    assert lines[3].endswith("trial   0 benchmarking level 2 of 3 (concurrency 8)")
    assert lines[4].endswith("trial   0 tearing down")
    assert "trial   0 [t0] complete" in lines[5]
    assert lines[6].endswith("progress: 1/3 done, 0 running, 2 left; ETA 40s")  # 2 x 20 s, one at a time
    assert "trial   1 started [2/3]" in lines[7] and "(ETA 40s)" in lines[7]
    assert len(lines) == 8


def test_terminal_status_line_redrawn_in_place() -> None:
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=True, clock=clock)
    c.study_started(planned=2, concurrency=2, known_trial_s=[30.0])
    c.on_event(TrialEvent(4, "t4", Phase.STARTED, at=clock.t, params={}))
    c.on_event(TrialEvent(4, "t4", Phase.BENCHMARKING, at=clock.t, level=1, levels=3, concurrency=1))
    clock.t += 10
    c.tick()
    assert c.status_text() == "0/2 done | #4 benchmarking 1/3 10s | ETA 30s"
    assert out.getvalue().endswith("\r\x1b[K0/2 done | #4 benchmarking 1/3 10s | ETA 30s")
    c.close()
    assert out.getvalue().endswith("\r\x1b[K")


def test_finalist_relaunches_print_their_phases_labelled_and_leave_when_they_end() -> None:
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=False, clock=clock)
    c.study_started(planned=1, concurrency=1)
    c.on_event(TrialEvent(0, "t0", Phase.STARTED, at=clock.t, params={"mem": 0.8}))
    c.on_event(TrialEvent(0, "t0", Phase.ENDED, at=clock.t))  # a trial leaves with its record, not with ENDED
    assert 0 in c.running
    c.on_record(_record(0, 20.0))
    c.relaunches_started(2)
    for tid in ("t0-f1r1", "t0-f1r2"):  # relaunches of a finished trial: same number, their own ids
        c.on_event(TrialEvent(0, tid, Phase.STARTED, at=clock.t, params={"mem": 0.8}))
        c.on_event(TrialEvent(0, tid, Phase.LAUNCHING, at=clock.t))
        c.on_event(TrialEvent(0, tid, Phase.BENCHMARKING, at=clock.t, level=1, levels=2, concurrency=1))
        assert list(c.relaunches) == [tid]
        c.on_event(TrialEvent(0, tid, Phase.TEARING_DOWN, at=clock.t))
        c.on_event(TrialEvent(0, tid, Phase.ENDED, at=clock.t))
        assert c.relaunches == {}
    lines = out.getvalue().splitlines()[3:]
    assert lines[0].endswith("finalist relaunch of trial 0 [t0-f1r1] started [1/2]  mem=0.8")
    assert lines[1].endswith("finalist relaunch of trial 0 [t0-f1r1] launching the engine")
    assert lines[2].endswith("finalist relaunch of trial 0 [t0-f1r1] benchmarking level 1 of 2 (concurrency 1)")
    assert lines[3].endswith("finalist relaunch of trial 0 [t0-f1r1] tearing down")
    assert lines[4].endswith("finalist relaunch of trial 0 [t0-f1r2] started [2/2]  mem=0.8")
    assert len(lines) == 8 and c.finished == 1 and c.running == {}  # the trials' counts are untouched


def test_the_status_line_shows_the_running_relaunches() -> None:
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=True, clock=clock)
    c.relaunches_started(3)
    c.on_event(TrialEvent(2, "t2-f1r1", Phase.READY, at=clock.t, seconds=3.0))
    clock.t += 4
    assert c.status_text() == "finalist stage: 1/3 relaunches started | #t2-f1r1 ready 4s"
    c.on_event(TrialEvent(2, "t2-f1r1", Phase.ENDED, at=clock.t))
    c.tick()
    assert out.getvalue().endswith("\r\x1b[K")  # nothing runs: the status line is cleared, not redrawn


def test_quiet_prints_only_errors_and_the_result() -> None:
    out, err = io.StringIO(), io.StringIO()
    c = Console(out=out, err=err, tty=False, verbosity=Verbosity.QUIET)
    c.study_started(planned=1, concurrency=1)
    c.say("study 's': 1 trial(s)")
    c.on_event(TrialEvent(0, "t0", Phase.STARTED, params={}))
    c.on_record(_record(0, 5.0))
    c.result("best: trial 0")
    c.error("error: boom")
    assert out.getvalue() == "best: trial 0\n" and err.getvalue() == "error: boom\n"


def test_ray_output_goes_to_the_log_and_the_console_still_prints(tmp_path: Path) -> None:
    """fd-level: what Ray/Tune write to descriptors 1 and 2 (Python or C++) lands in the log, not on the console."""
    log = tmp_path / "ray-console.log"
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from autotune.progress.console import Console
        from autotune.progress.noise import ray_output_to_log
        c = Console(out=sys.stdout, err=sys.stderr, tty=False)
        with ray_output_to_log(Path({str(log)!r}), c):
            print("TUNE BOX")
            os.write(2, b"RAYLET WARNING\\n")
            c.say("study line")
            c.error("study error")
        print("after")
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "study line\nafter\n" and proc.stderr == "study error\n"
    assert log.read_text() == "TUNE BOX\nRAYLET WARNING\n"


def test_the_running_table_counts_relaunches_apart_and_forgets_a_run_when_it_ends() -> None:
    table = RunningTable()
    table.update(TrialEvent(0, "t0", Phase.BENCHMARKING))
    table.update(TrialEvent(0, "t0", Phase.ENDED))  # the trainable returned: no longer running
    table.update(TrialEvent(0, "t0", Phase.FINISHED))  # the driver stored the record: nothing left to forget
    table.update(TrialEvent(1, "t1", Phase.LAUNCHING))
    table.kind = RELAUNCH
    table.update(TrialEvent(1, "t1", Phase.READY))  # a run keeps the kind it started with
    table.update(TrialEvent(0, "t0-f1r1", Phase.STARTED))
    table.update(TrialEvent(0, "t0-f1r2", Phase.TEARING_DOWN))
    counts = table.counts()
    assert counts[TRIAL, Phase.READY] == 1 and counts[RELAUNCH, Phase.STARTED] == 1
    assert counts[RELAUNCH, Phase.TEARING_DOWN] == 1 and sum(counts.values()) == 3
    for tid in ("t1", "t0-f1r1", "t0-f1r2"):
        table.update(TrialEvent(0, tid, Phase.ENDED))
    assert sum(table.counts().values()) == 0


def test_the_status_line_fits_the_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """A status line wider than the terminal wraps, and ``\\r`` then redraws only its last row: every tick would leave
    a row behind. It is cut to the terminal's width."""
    monkeypatch.setenv("COLUMNS", "80")
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=True, clock=clock)
    c.study_started(planned=16, concurrency=8, known_trial_s=[30.0])
    for n in range(8):  # 8 GPUs, one per trial: eight running trials
        c.on_event(TrialEvent(n, f"t{n}", Phase.BENCHMARKING, at=clock.t, level=2, levels=4, concurrency=64))
    assert len(c.status_text()) > 80
    c.tick()
    drawn = out.getvalue().rsplit("\r\x1b[K", 1)[1]
    assert 0 < len(drawn) < 80 and c.status_text().startswith(drawn)


def test_a_relaunch_run_again_after_its_node_was_lost_keeps_its_place() -> None:
    """The stage reruns a relaunch whose node was lost under the same id (its ENDED came first): it is still 1 of 2."""
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=False, clock=clock)
    c.relaunches_started(2)
    c.on_event(TrialEvent(3, "t3-f1r1", Phase.STARTED, at=clock.t, params={"mem": 0.8}))
    c.on_event(TrialEvent(3, "t3-f1r1", Phase.ENDED, at=clock.t))  # NodeLostError: run_trial's finally
    c.on_event(TrialEvent(3, "t3-f1r1", Phase.STARTED, at=clock.t, params={"mem": 0.8}))
    lines = out.getvalue().splitlines()
    assert lines[1].endswith("finalist relaunch of trial 3 [t3-f1r1] started [1/2]  mem=0.8")
    assert c.status_text().startswith("finalist stage: 1/2 relaunches started")


def test_the_eta_counts_only_the_trials_the_time_box_lets_start() -> None:
    """--stop-after-s: no trial starts after the box's start deadline, so the ETA is not that of the whole budget."""
    # one slot, 10 s a trial, 38 to start, but new trials start only within the next 25 s: at 0, 10 and 20 s
    assert eta_seconds(trial_s=[10.0], running_elapsed=[], to_start=38, concurrency=1, start_within=25.0) == 30.0
    # the deadline has passed: only the running trial is waited for
    assert eta_seconds(trial_s=[10.0], running_elapsed=[4.0], to_start=38, concurrency=1, start_within=-1.0) == 6.0
    out, clock = io.StringIO(), Clock()
    c = Console(out=out, tty=False, clock=clock)
    c.study_started(planned=40, concurrency=2, known_trial_s=[60.0], start_until=clock.t + 100)
    assert c.eta() == 120.0  # two slots start trials at 0 and 60 s (none at 120): 120 s, not 20 rounds (1200 s)


def test_a_failed_trial_is_one_line_even_when_its_message_is_a_traceback() -> None:
    """A replica that died gives a message with Ray's traceback in it: the log still gets one line per event."""
    from autotune.progress.console import fmt_record
    from autotune.trial.records import FailureKind

    message = (
        'ReplicaError: benchmark: RayTaskError(RuntimeError): ray::EngineServer.benchmark()\n  File "x.py", line 3'
    )
    failed = replace(
        _record(0, 20.0), outcome=TrialOutcome.FAILED, failure=FailureKind.UNKNOWN, feasible=False, message=message
    )
    line = fmt_record(failed)
    assert "\n" not in line and line.endswith('ray::EngineServer.benchmark() File "x.py", line 3')


def test_verbose_json_keeps_ray_output_off_stdout(tmp_path: Path) -> None:
    """``--verbose --json``: Ray's and Tune's output is shown, on stderr beside the progress, so that stdout holds only
    the summary document."""
    log = tmp_path / "ray-console.log"
    script = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from autotune.progress.console import Console
        from autotune.progress.noise import ray_output_to_log
        c = Console(out=sys.stderr, err=sys.stderr, tty=False)  # --json: the progress goes to stderr
        with ray_output_to_log(Path({str(log)!r}), c, enabled=False):  # --verbose
            print("TUNE BOX")
            os.write(1, b"RAYLET WARNING\\n")
            c.say("study line")
        print('{{"schema_version": 1}}')
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == '{"schema_version": 1}\n'
    assert proc.stderr == "TUNE BOX\nRAYLET WARNING\nstudy line\n" and not log.exists()
