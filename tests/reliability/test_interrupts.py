"""Case 5 of the failure matrix, unit level: Ctrl-C, SIGTERM and a lost Ray cluster stop a study honestly."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import optuna
import pytest
from ray.tune.search import Searcher

from autotune.space import load_study
from autotune.study.interrupts import EXIT_INFRASTRUCTURE, RayWatchdog, StopState, StudyCancelled, stop_handlers
from autotune.study.optuna_study import open_study
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.store import StudyStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def default_signal_handlers():  # type: ignore[no-untyped-def]
    """Each test starts with Python's default SIGINT/SIGTERM handlers and leaves them so: a test that ends in a lost
    cluster leaves SIGINT ignored (as the driver does), and a pytest-xdist worker may start with SIGINT ignored."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def _wait_for(cond, timeout_s: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_first_ctrl_c_stops_new_trials_second_cancels() -> None:
    state, halted, said = StopState(), [], []
    with stop_handlers(state, lambda: halted.append(1), said.append):
        os.kill(os.getpid(), signal.SIGINT)
        _wait_for(lambda: bool(halted))
        assert halted == [1] and state.signal_name == "SIGINT" and "Ctrl-C again" in said[0]
        with pytest.raises(StudyCancelled):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(2)
    assert state.exit_code == 130 and "INTERRUPTED" in state.banner
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_sigterm_cancels_at_once_and_exits_143() -> None:
    state, halted = StopState(), []
    with pytest.raises(StudyCancelled), stop_handlers(state, lambda: halted.append(1), lambda s: None):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(2)
    assert halted == [1] and state.exit_code == 143


def test_watchdog_detects_a_lost_cluster_within_seconds() -> None:
    state, lost = StopState(), []
    dead_at = time.monotonic() + 0.3
    probe = lambda: "the local raylet exited with code -9" if time.monotonic() > dead_at else ""  # noqa: E731
    with RayWatchdog(state, probe, period_s=0.1, on_lost=lambda: lost.append(time.monotonic())):
        _wait_for(lambda: bool(lost))
    assert lost and lost[0] - dead_at < 2.0
    assert state.exit_code == EXIT_INFRASTRUCTURE and "raylet" in state.banner


def test_watchdog_counts_a_hung_probe_as_lost() -> None:
    state, lost = StopState(), []
    with RayWatchdog(
        state, lambda: time.sleep(30) or "", period_s=0.05, probe_timeout_s=0.3, on_lost=lambda: lost.append(1)
    ):
        _wait_for(lambda: bool(lost))
    assert "did not answer" in state.infrastructure


def test_watchdog_interrupts_the_main_thread_through_the_handlers() -> None:
    state = StopState()
    with (
        pytest.raises(StudyCancelled),
        stop_handlers(state, lambda: None, lambda s: None),
        RayWatchdog(state, lambda: "no Ray node is alive", period_s=0.05),
    ):
        # short sleeps, as Tune's loop polls: the watchdog's SIGINT (interrupt_main) is handled between them, while one
        # long sleep would only end after its 5 s
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            time.sleep(0.01)
    assert state.infrastructure == "no Ray node is alive"


def test_a_trial_lost_with_the_cluster_is_not_recorded_nor_told(tmp_path: Path) -> None:
    spec = load_study(ROOT / "search_spaces" / "smoke.yaml")
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    recorded: list[object] = []
    s = OptunaStudySearcher(
        spec,
        study,
        budget=5,
        on_record=lambda r, log: recorded.append(r),
        make_missing_record=lambda n, tid, p, why: pytest.fail("recorded as a trial failure"),
    )
    s.suggest("a")
    s.infrastructure_lost = True
    s.halted = True
    s.on_trial_complete("a", None, error=True)  # what Tune reports for a trial whose raylet died
    assert recorded == []
    states = [t.state for t in study.trials]  # the resume fails it, untold (seed points still queued stay so)
    assert states[0] == optuna.trial.TrialState.RUNNING
    assert all(st == optuna.trial.TrialState.WAITING for st in states[1:])
    assert s.suggest("b") == Searcher.FINISHED


def test_an_interrupted_export_says_so(tmp_path: Path) -> None:
    from autotune.export import export_study
    from tests.export.conftest import LEVELS, OBJECTIVES, make_record

    state = StopState(signal_name="SIGINT")
    recs = [make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0})]
    export_study(
        tmp_path, study_name="demo", objectives=OBJECTIVES, records=recs, load_levels=LEVELS, note=state.banner
    )
    assert (tmp_path / "best" / "report.md").read_text().startswith("> **INTERRUPTED (SIGINT)")
    assert json.loads((tmp_path / "best" / "best.json").read_text())["note"].startswith("INTERRUPTED")


def test_sigterm_outside_the_trials_exits_143_with_a_word(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM after Ray started but with no trial running (Serve starting, its shutdown, the export): ``ray.init``'s
    own handler (``sys.exit(15)``) ended the driver with exit code 15 and no word."""
    import sys

    from autotune import search
    from autotune.study import driver as driver_mod

    def start_ray_as_ray_does(*args, **kwargs):  # type: ignore[no-untyped-def]
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # what ray.init installs
        return False, 1.0

    def run(self) -> int:  # type: ignore[no-untyped-def]
        self._start_ray()
        os.kill(os.getpid(), signal.SIGTERM)  # e.g. during the export
        time.sleep(2)
        return 0

    monkeypatch.setattr(driver_mod, "start_ray", start_ray_as_ray_does)
    monkeypatch.setattr(driver_mod.StudyDriver, "run", run)
    code = search.main(["--space", "smoke", "--results-dir", str(tmp_path), "--address", "ray://nowhere:1"])
    assert code == 143
    assert "interrupted (SIGTERM)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the caller's handler is back
