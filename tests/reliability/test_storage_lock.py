"""Issue 28 case 1: one driver per study across results directories. Two drivers of one study name on one shared
``--storage`` are refused wherever their results directories are: the lock lives with the storage too (SQLite: a file
beside the database; PostgreSQL: an advisory lock in the same database).

Before: both ran, the shared Optuna study got both halves and measured one point twice; the guard fired only once the
storage held completed trials, so two fresh starts raced past it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.search import main
from autotune.study import driver as driver_mod
from autotune.trial import registry

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "search_spaces" / "smoke.yaml")

# A driver of the smoke study whose search blocks (no Ray): it holds whatever locks a run holds until it is killed.
FIRST = """
import sys, time
from autotune.study import driver
from autotune.trial import registry
from autotune.search import main
registry.sweep = lambda *a, **k: []
def hold(self, *a, **k):
    print("running", flush=True)
    time.sleep(120)
driver.StudyDriver._run_tune = hold
sys.exit(main(sys.argv[1:]))
"""


def _first_driver(results: Path, storage: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            FIRST,
            "--space",
            SMOKE,
            "--results-dir",
            str(results),
            "--storage",
            storage,
            "--verbose",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # "--verbose": the driver's output stays on its stdout
        if line.strip() == "running":
            return proc
    proc.wait()
    raise AssertionError(f"the first driver did not start (exit {proc.returncode})")


def _second_is_refused(
    tmp_path: Path, storage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _first_driver(tmp_path / "results-a", storage)
    try:
        touched: list[str] = []
        monkeypatch.setattr(registry, "sweep", lambda *a, **k: touched.append("sweep") or [])
        monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: touched.append("tune"))
        code = main(["--space", SMOKE, "--results-dir", str(tmp_path / "results-b"), "--storage", storage])
        err = capsys.readouterr().err
        assert code == 2, err
        assert f"pid {first.pid}" in err and "smoke" in err and "Traceback" not in err, err
        assert touched == []
        written = sorted(p.name for p in (tmp_path / "results-b" / "smoke").iterdir())
        assert written == [".lock"], f"nothing may be written: {written}"
        assert first.poll() is None
    finally:
        first.kill()
        first.wait()
    # the holder is gone (SIGKILL): the storage's lock went with it (PostgreSQL frees a session's advisory lock when
    # its backend sees the connection closed, within moments), and the study runs from the other directory
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: None)
    deadline = time.monotonic() + 20
    while (code := main(["--space", SMOKE, "--results-dir", str(tmp_path / "results-b"), "--storage", storage])) == 2:
        err = capsys.readouterr().err
        assert f"pid {first.pid}" in err and time.monotonic() < deadline, err
        time.sleep(0.5)
    assert code != 2


def test_two_fresh_drivers_on_one_sqlite_storage_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _second_is_refused(tmp_path, f"sqlite:///{tmp_path / 'shared.db'}", monkeypatch, capsys)


def test_the_default_storage_of_one_directory_and_a_url_naming_it_are_one_study(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first driver uses results-a/smoke/study.db by default; a second names that file with --storage."""
    first = _first_driver(tmp_path / "results-a", f"sqlite:///{tmp_path / 'results-a' / 'smoke' / 'study.db'}")
    first.kill()
    first.wait()
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", FIRST, "--space", SMOKE, "--results-dir", str(tmp_path / "results-a"), "--verbose"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        assert any(line.strip() == "running" for line in proc.stdout)
        monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
        monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: pytest.fail("must not run"))
        code = main(
            [
                "--space",
                SMOKE,
                "--results-dir",
                str(tmp_path / "results-b"),
                "--storage",
                f"sqlite:///{tmp_path / 'results-a' / 'smoke' / 'study.db'}",
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and f"pid {proc.pid}" in err, err
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.slow
@pytest.mark.xdist_group("postgres")  # with the other test of the session's PostgreSQL server: one server
def test_two_fresh_drivers_on_one_postgresql_storage_are_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    postgres_url: str,  # tests/conftest.py: a real PostgreSQL from pgserver
) -> None:
    _second_is_refused(tmp_path, postgres_url, monkeypatch, capsys)
