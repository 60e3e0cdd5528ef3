"""Case 6 of the failure matrix: failures are classified by cause, and one bad sampled value never stops a study."""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from autotune.core.errors import EngineError
from autotune.engines.base import classify_failure, key_error_line, rejected_flags_in_log
from autotune.engines.preflight import run_help
from autotune.space import load_study
from autotune.study.optuna_study import open_study
from autotune.study.runner import base_record, failed_record, now_iso
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import FailureKind

ROOT = Path(__file__).resolve().parents[2]


def argparse_error(argv: list[str]) -> str:
    """What SGLang's argparse prints for ``argv`` (a parser with one choice flag and one int flag)."""
    p = argparse.ArgumentParser(prog="launch_server.py")
    p.add_argument("--attention-backend", choices=["triton", "fa3"])
    p.add_argument("--max-running-requests", type=int)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        p.parse_args(argv)
    return "INFO some startup line\n" + err.getvalue()


@pytest.mark.parametrize(
    ("argv", "kind"),
    [
        (["--attention-backend", "bogus"], FailureKind.INVALID_VALUE),
        (["--max-running-requests", "many"], FailureKind.INVALID_VALUE),
        (["--no-such-flag", "1"], FailureKind.UNKNOWN_FLAG),
    ],
)
def test_argparse_rejections_are_classified_by_cause(argv: list[str], kind: FailureKind) -> None:
    assert classify_failure(argparse_error(argv), ready=False) is kind
    assert rejected_flags_in_log(argparse_error(argv)) == (argv[0][2:],)


def test_help_timeout_is_its_own_kind() -> None:
    with pytest.raises(EngineError) as info:
        run_help([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert info.value.kind is FailureKind.HELP_TIMEOUT


def test_missing_engine_is_engine_unavailable() -> None:
    with pytest.raises(EngineError) as info:
        run_help([sys.executable, "-m", "no_such_engine_module_xyz"], timeout_s=30)
    assert info.value.kind is FailureKind.ENGINE_UNAVAILABLE
    with pytest.raises(EngineError) as info:
        run_help(["/nonexistent/python"], timeout_s=30)
    assert info.value.kind is FailureKind.ENGINE_UNAVAILABLE


def _spec_with_sampled_backend(tmp_path: Path):  # type: ignore[no-untyped-def]
    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["server"]["flags"] = {"max-running-requests": 32}
    doc["study"]["points_to_evaluate"] = []
    doc["params"] = {
        "attention_backend": {"flag": "attention-backend", "type": "categorical", "choices": ["triton", "bogus"]}
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_study(path)


def _searcher(spec, tmp_path: Path) -> OptunaStudySearcher:  # type: ignore[no-untyped-def]
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    return OptunaStudySearcher(
        spec, study, budget=5, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )


def _launch_failure(spec, number: int, params: dict, argv: list[str]) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """The record the runner writes when the server exits on argparse's error (as the launcher words it)."""
    tail = argparse_error(argv)
    kind = classify_failure(tail, ready=False)
    rec = base_record(spec, None, trial_id="a", number=number, params=params, started_at=now_iso())
    msg = f"server exited with code 2 before it was ready ({kind.value}): {key_error_line(tail)}"
    flags = list(rejected_flags_in_log(tail))  # what the launcher puts in its LaunchError, and the runner in the record
    return replace(failed_record(rec, spec, kind, msg, tail), rejected_flags=flags).to_json()


def test_one_bad_choice_of_a_sampled_categorical_does_not_stop_the_study(tmp_path: Path) -> None:
    spec = _spec_with_sampled_backend(tmp_path)
    s = _searcher(spec, tmp_path)
    cfg = s.suggest("a")
    rec = _launch_failure(spec, cfg["number"], cfg["params"], ["--attention-backend", "bogus"])
    s.on_trial_complete("a", s.inbox.report("a", rec))
    assert rec["failure"] == "invalid_value"
    assert s.stop_reason == ""


def test_a_fixed_value_the_engine_rejects_stops_the_study(tmp_path: Path) -> None:
    spec = _spec_with_sampled_backend(tmp_path)
    s = _searcher(spec, tmp_path)
    cfg = s.suggest("a")
    rec = _launch_failure(spec, cfg["number"], cfg["params"], ["--max-running-requests", "many"])
    s.on_trial_complete("a", s.inbox.report("a", rec))
    assert "every trial would fail" in s.stop_reason and "--max-running-requests" in s.stop_reason
