"""Case 2 of the failure matrix: a second run of a study that is running says who runs it and touches nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.search import main
from autotune.study import driver as driver_mod
from autotune.trial import registry

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "search_spaces" / "smoke.yaml")

HOLD = """
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, json.dumps({"pid": os.getpid(), "host": "node-a", "started_at": "t0", "argv": ["first-run"]}).encode())
print("held", flush=True)
time.sleep(60)
"""


def test_second_driver_of_a_running_study_exits_without_touching_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    study_dir = tmp_path / "smoke"
    study_dir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(study_dir / ".lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        touched: list[str] = []
        monkeypatch.setattr(registry, "sweep", lambda *a, **k: touched.append("sweep") or [])
        monkeypatch.setattr(driver_mod, "open_shared_study", lambda *a, **k: touched.append("optuna"))
        monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: touched.append("tune"))
        code = main(["--space", SMOKE, "--results-dir", str(tmp_path)])
        err = capsys.readouterr().err
        assert code != 0
        assert f"pid {holder.pid} on node-a" in err and "first-run" in err
        assert touched == []
        assert sorted(p.name for p in study_dir.iterdir()) == [".lock"], "nothing may be written"
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_lock_is_free_again_after_the_holder_dies(tmp_path: Path) -> None:
    from autotune.study.studylock import StudyLock

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / ".lock")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()  # SIGKILL: the kernel drops the flock
    holder.wait()
    with StudyLock(tmp_path) as lock:
        assert f'"pid": {os.getpid()}' in lock.path.read_text()


def test_file_shaped_results_path_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.write_text("not a directory")
    assert main(["--space", SMOKE, "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and "--results-dir" in err
