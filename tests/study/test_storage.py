"""The Optuna storage a study resumes on must hold a trial for every record: a lost, older or other storage is refused.

Before: a missing ``study.db`` (or a resume without the ``--storage`` the study ran with) opened an empty Optuna study;
its new trials were numbered from 0 again, re-ran the seed points, and each new record replaced the old record of the
same number in the table, the report and ``best/``."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.search import main
from autotune.study import driver as driver_mod
from autotune.study.storage import main as storage_main
from autotune.trial import registry
from autotune.trial.store import StudyStore
from tests.reliability.test_study_identity import SMOKE, _finished_study


@pytest.fixture
def no_tune(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: pytest.fail("must not run"))


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len([x for x in err.splitlines() if x.startswith("error:")]) == 1, err
    return err


def test_a_missing_study_db_is_refused_and_rebuilt_from_the_records(
    tmp_path: Path, no_tune: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "my results"  # a path with a space: the command it prints must run as printed
    root = _finished_study(results)
    (root / "study.db").unlink()
    err = _refused(["--space", str(SMOKE), "--results-dir", str(results), "--trials", "3"], capsys)
    assert "trial(s) 0)" in err and f"--rebuild-db '{root}'" in err and "--storage" in err, err
    assert not (root / "study.db").exists(), "nothing is created"

    assert storage_main(["--rebuild-db", str(root)]) == 0
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: None)
    assert main(["--space", str(SMOKE), "--results-dir", str(results), "--trials", "3"]) != 2
    assert "1 finished trial(s) kept, 2 to run" in capsys.readouterr().out


def test_a_study_db_older_than_the_records_is_refused(
    tmp_path: Path, no_tune: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """study.db restored from a backup taken before the last record: the next trial would be numbered as that record."""
    root = _finished_study(tmp_path)
    store = StudyStore(root)
    last = store.load()[0]
    store.append(type(last).from_json({**last.to_json(), "number": 1, "trial_id": "later"}))
    err = _refused(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--trials", "3"], capsys)
    assert "1 of this results directory's records (trial(s) 1)" in err, err


def test_a_resume_on_another_storage_is_refused(
    tmp_path: Path, no_tune: None, capsys: pytest.CaptureFixture[str]
) -> None:
    _finished_study(tmp_path)
    other = f"sqlite:///{tmp_path / 'team.db'}"
    err = _refused(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--storage", other], capsys)
    assert "in sqlite:///" in err and "Pass the --storage it ran with" in err, err


def test_fresh_on_a_storage_that_holds_the_study_is_refused_before_anything_moves(
    tmp_path: Path, no_tune: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the directory was moved aside, then the study was refused as "another results directory's"."""
    from dataclasses import replace

    from autotune.space import load_study
    from autotune.study.driver import _spec_json
    from autotune.study.optuna_study import open_study
    from tests.export.conftest import make_record

    spec = load_study(SMOKE)
    store = StudyStore(tmp_path / spec.name)
    store.ensure()
    store.write_json("study.json", _spec_json(spec))
    url = f"sqlite:///{tmp_path / 'team.db'}"
    study = open_study(spec, url)
    trial = study.ask()
    store.append(replace(make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0}), study=spec.name))
    study.tell(trial, [1.0])
    err = _refused(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--storage", url, "--fresh"], capsys)
    assert "--fresh cannot start the study 'smoke' over" in err and "optuna delete-study" in err, err
    assert "another results directory" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["smoke", "team.db"]


def test_the_rebuild_command_for_a_damaged_study_db_runs_as_printed_from_a_path_with_spaces(
    tmp_path: Path, no_tune: None, capsys: pytest.CaptureFixture[str]
) -> None:
    import shlex

    results = tmp_path / "my results"
    root = _finished_study(results)
    db = root / "study.db"
    db.write_bytes(db.read_bytes()[:1000])
    err = _refused(["--space", str(SMOKE), "--results-dir", str(results)], capsys)
    command = err.split("`")[1]
    assert shlex.split(command)[-1] == str(root), command
    assert storage_main(shlex.split(command)[3:]) == 0
