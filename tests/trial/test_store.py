from __future__ import annotations

from pathlib import Path

from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord
from autotune.trial.store import StudyStore


def rec(number: int, outcome: TrialOutcome = TrialOutcome.COMPLETE) -> TrialRecord:
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={"x": number},
        flags={},
        env={},
        argv=["a"],
        outcome=outcome,
        failure=FailureKind.OOM_AT_LAUNCH if outcome is TrialOutcome.FAILED else None,
    )


def test_append_load_roundtrip_and_files(tmp_path: Path) -> None:
    store = StudyStore(tmp_path / "s")
    store.append(rec(0), "log text")
    store.append(rec(1, TrialOutcome.FAILED))
    loaded = store.load()
    assert [r.number for r in loaded] == [0, 1]
    assert loaded[1].failure is FailureKind.OOM_AT_LAUNCH and loaded[1].outcome is TrialOutcome.FAILED
    assert (tmp_path / "s" / "trials" / "0000-t0.json").exists()
    assert (tmp_path / "s" / "logs" / "0000-t0.log").read_text() == "log text"


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    store = StudyStore(tmp_path / "s")
    store.append(rec(0))
    with store.records_path.open("a") as fh:
        fh.write('{"study": "s", "trial_id": "t1", "num')  # driver killed mid-write
    assert [r.number for r in store.load()] == [0]


def test_archive_moves_aside_never_deletes(tmp_path: Path) -> None:
    store = StudyStore(tmp_path / "s")
    store.append(rec(0))
    moved = store.archive()
    assert moved is not None and (moved / "trials.jsonl").exists() and not store.root.exists()
