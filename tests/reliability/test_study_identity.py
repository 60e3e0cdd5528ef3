"""Issue 28 case 7: a results directory copied or renamed, then resumed under the new study name, is refused.

Before: ``study.db`` got a second Optuna study, numbering restarted at 0, and the new trial 0 silently replaced the old
trial 0 in the table, the report and ``best/``."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from autotune.search import main
from autotune.space import load_study
from autotune.study import driver as driver_mod
from autotune.study.driver import _spec_json
from autotune.study.optuna_study import open_study
from autotune.trial import registry
from autotune.trial.store import StudyStore
from tests.export.conftest import make_record

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "search_spaces" / "smoke.yaml"


def _finished_study(results: Path) -> Path:
    """results/smoke as a finished one-trial run leaves it: study.json, the record, study.db with the told trial."""
    spec = load_study(SMOKE)
    store = StudyStore(results / spec.name)
    store.ensure()
    store.write_json("study.json", _spec_json(spec))
    study = open_study(spec, store.db_url)
    trial = study.ask()
    record = replace(make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0}), study=spec.name)
    store.append(record)
    study.tell(trial, [1.0] * len(spec.objectives))
    return store.root


def test_resuming_a_renamed_directory_under_its_new_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _finished_study(tmp_path)
    moved = old.rename(tmp_path / "copy")
    before = {p.name: p.read_bytes() for p in moved.iterdir() if p.is_file()}
    touched: list[str] = []
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: touched.append("sweep") or [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: touched.append("tune"))
    code = main(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--study", "copy"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "'smoke'" in err and "--study smoke" in err and "Traceback" not in err, err
    assert touched == []
    after = {p.name: p.read_bytes() for p in moved.iterdir() if p.is_file() and p.name != ".lock"}
    assert after == {k: v for k, v in before.items() if k != ".lock"}, "nothing may be written"
    names = [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{moved / 'study.db'}")]
    assert names == ["smoke"], names


def test_a_copied_directory_without_study_json_is_known_by_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _finished_study(tmp_path / "a")
    copy = tmp_path / "b" / "copy"
    shutil.copytree(old, copy)
    (copy / "study.json").unlink()
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: pytest.fail("must not run"))
    code = main(["--space", str(SMOKE), "--results-dir", str(tmp_path / "b"), "--study", "copy"])
    err = capsys.readouterr().err
    assert code == 2 and "'smoke'" in err and "trials.jsonl" in err, err


def test_the_same_name_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _finished_study(tmp_path)
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: None)
    main(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--trials", "1"])
    out = capsys.readouterr()
    assert "error" not in out.err and "1 finished trial(s) kept" in out.out, out
