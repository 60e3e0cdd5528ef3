"""Case 1 of the failure matrix: a torn write, unreadable lines and newer records never lose or hide a trial."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.trial.records import SCHEMA_VERSION, FailureKind, TrialOutcome, TrialRecord
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
        failure=None if outcome is TrialOutcome.COMPLETE else FailureKind.OOM_AT_LAUNCH,
    )


def test_torn_last_line_does_not_swallow_the_next_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = StudyStore(tmp_path / "s")
    store.append(rec(0))
    with store.records_path.open("a") as fh:
        fh.write('{"study": "s", "trial_id": "t1", "num')  # disk full / killed mid-write
    store.append(rec(1))  # the rerun's next record
    assert [r.number for r in store.load()] == [0, 1]
    assert store.torn_path.read_text() == '{"study": "s", "trial_id": "t1", "num\n'
    assert "cut short" in capsys.readouterr().err
    assert store.records_path.read_text().endswith("\n") and len(store.records_path.read_text().splitlines()) == 2


def test_repair_of_a_file_that_is_one_fragment(tmp_path: Path) -> None:
    store = StudyStore(tmp_path / "s")
    store.ensure()
    store.records_path.write_text('{"stu')
    assert store.repair() == '{"stu'
    assert store.records_path.read_text() == ""
    assert store.repair() == ""  # idempotent


def test_unreadable_line_is_reported_not_silently_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = StudyStore(tmp_path / "s")
    store.append(rec(0))
    with store.records_path.open("a") as fh:
        fh.write("not json at all\n")
    store.append(rec(2))
    assert [r.number for r in store.load()] == [0, 2]
    err = capsys.readouterr().err
    assert "unreadable record" in err and "line 2" in err


def test_newer_record_with_unknown_fields_is_kept_and_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = StudyStore(tmp_path / "s")
    newer = rec(0).to_json() | {"schema_version": SCHEMA_VERSION + 1, "energy_j": 12.5}
    newer["phases"]["kv_warmup_s"] = 0.5
    store.ensure()
    store.records_path.write_text(json.dumps(newer) + "\n")
    loaded = store.load()
    assert [r.number for r in loaded] == [0]
    assert loaded[0].extra == {"energy_j": 12.5, "phases.kv_warmup_s": 0.5}
    assert "energy_j" in capsys.readouterr().err
    again = loaded[0].to_json()  # a rewrite keeps what it did not understand
    assert again["energy_j"] == 12.5 and again["phases"]["kv_warmup_s"] == 0.5


def test_records_carry_a_schema_version(tmp_path: Path) -> None:
    assert rec(0).to_json()["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    "kwargs",
    [
        {"outcome": TrialOutcome.FAILED, "failure": None},
        {"outcome": TrialOutcome.COMPLETE, "failure": FailureKind.OOM_AT_LAUNCH},
        {"outcome": TrialOutcome.FAILED, "failure": FailureKind.UNKNOWN, "feasible": True},
        {"outcome": TrialOutcome.COMPLETE, "failure": None, "number": -1},
    ],
)
def test_trial_record_invariants(kwargs: dict) -> None:  # type: ignore[type-arg]
    base = {"study": "s", "trial_id": "t", "number": 0, "params": {}, "flags": {}, "env": {}, "argv": []}
    with pytest.raises(ValueError):
        TrialRecord(**(base | kwargs))
