"""Issue 28's partial cases: recovery. A torn middle record is restored from ``trials/``; a full disk is a one-line
error; ``study.db`` is rebuilt from the records; a half export is detected and the export is atomic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord
from autotune.trial.store import StudyStore

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "search_spaces" / "smoke.yaml"


def rec(number: int) -> TrialRecord:
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={"x": number},
        flags={},
        env={},
        argv=["a"],
        outcome=TrialOutcome.FAILED,
        failure=FailureKind.OOM_AT_LAUNCH,
    )


def test_a_record_torn_in_the_middle_is_restored_from_its_copy_under_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = StudyStore(tmp_path / "s")
    for n in range(3):
        store.append(rec(n))
    lines = store.records_path.read_text().splitlines()
    lines[1] = lines[1][:25]  # the middle record, torn (a bad sector, a copy cut short, an editor)
    store.records_path.write_text("\n".join(lines) + "\n")
    assert [r.number for r in store.load()] == [0, 1, 2], "trial 1 comes back from trials/0001-t1.json"
    err = capsys.readouterr().err
    assert "restored" in err and "0001-t1.json" in err
    store.restore()
    assert [r.number for r in store.read().records] == [0, 1, 2]
    assert sum(1 for line in store.records_path.read_text().splitlines() if '"trial_id": "t1"' in line) == 1, (
        "the restored record is appended to trials.jsonl once"
    )
    store.restore()
    assert sum(1 for line in store.records_path.read_text().splitlines() if '"trial_id": "t1"' in line) == 1


def test_a_full_disk_is_a_one_line_error_that_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The write of a record fails with ENOSPC (as the kernel reports a full disk) in the middle of the search."""
    import errno

    from autotune.search import main
    from autotune.study import driver as driver_mod
    from autotune.trial import registry

    def full(self, record, log_text=""):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.records_path))

    def one_trial(self, *a, **k):  # type: ignore[no-untyped-def]
        self._on_record(rec(0), "")

    monkeypatch.setattr(StudyStore, "append", full)

    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", one_trial)
    code = main(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--verbose"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    line = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(line) == 1 and "No space left on device" in line[0] and "free space" in line[0].lower(), err
    assert "same command" in line[0]


def test_a_truncated_study_db_is_explained_and_rebuilt_from_the_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import optuna

    from autotune.search import main
    from autotune.study import driver as driver_mod
    from autotune.study.storage import main as storage_main
    from autotune.trial import registry
    from tests.reliability.test_study_identity import _finished_study

    root = _finished_study(tmp_path)
    db = root / "study.db"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 3])  # cut short
    monkeypatch.setattr(registry, "sweep", lambda *a, **k: [])
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: pytest.fail("must not run"))
    assert main(["--space", str(SMOKE), "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--rebuild-db" in err and "database server" not in err and "Traceback" not in err, err

    assert storage_main(["--rebuild-db", str(root)]) == 0
    out = capsys.readouterr().out
    assert "rebuilt" in out and "study.db.broken-" in out, out
    assert any(p.name.startswith("study.db.broken-") for p in root.iterdir())
    study = optuna.load_study(study_name="smoke", storage=f"sqlite:///{db}")
    assert [t.number for t in study.trials] == [0] and study.trials[0].state.name == "COMPLETE"
    assert study.trials[0].user_attrs["trial_id"] == StudyStore(root).load()[0].trial_id
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: None)
    assert main(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--trials", "1"]) != 2
    assert "1 finished trial(s) kept" in capsys.readouterr().out


def test_an_export_killed_midway_leaves_the_last_whole_one_and_is_detected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autotune.export import export_study, half_export, writer
    from tests.export.conftest import LEVELS, OBJECTIVES, make_record

    recs = [make_record(0, tputs={1: 100.0, 8: 500.0, 32: 900.0, 128: 1000.0})]
    real = writer._write_atomic

    def killed_after_best_json(path: Path, text: str, *, mode: int) -> None:
        real(path, text, mode=mode)
        if path.name == "best.json":
            raise KeyboardInterrupt  # stands for the SIGKILL: nothing after this line runs

    monkeypatch.setattr(writer, "_write_atomic", killed_after_best_json)
    with pytest.raises(KeyboardInterrupt):
        export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, records=recs, load_levels=LEVELS)
    best = tmp_path / "best"
    assert not (best / "best.json").exists() or (best / "launch.sh").exists(), (
        "best/ never holds best.json without launch.sh"
    )
    assert "cut short" in half_export(tmp_path)
    monkeypatch.setattr(writer, "_write_atomic", real)
    export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, records=recs, load_levels=LEVELS)
    assert (best / "launch.sh").exists() and (best / "best.json").exists() and half_export(tmp_path) == ""
    (best / "report.html").write_text("<html></html>")  # written after the export, by the report

    monkeypatch.setattr(writer, "_write_atomic", killed_after_best_json)
    with pytest.raises(KeyboardInterrupt):
        export_study(tmp_path, study_name="demo", objectives=OBJECTIVES, records=recs, load_levels=LEVELS)
    assert (best / "launch.sh").exists() and (best / "best.json").exists() and (best / "report.html").exists()
    assert "best/ holds the previous complete export" in half_export(tmp_path)
