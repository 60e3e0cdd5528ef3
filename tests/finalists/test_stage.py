"""The finalist stage's loop (``autotune.finalists.stage.run_stage``) over a stand-in for Ray's task API: relaunches in
the plan's order, each stored before the next starts, a relaunch that raises recorded as lost, a resumed stage running
only the missing slots, an interrupt starting nothing new."""

from __future__ import annotations

import sys
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune.finalists.outcome import StagePlan
from autotune.finalists.stage import run_stage
from autotune.finalists.store import FinalistStore
from autotune.space import load_study
from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord
from tests.finalists.test_finalists import trial

SMOKE = Path(__file__).resolve().parents[2] / "autotune" / "search_spaces" / "smoke.yaml"


class _Ref:
    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args


def _fake_ray(calls: list[tuple[str, int]]) -> types.SimpleNamespace:
    """``ray.remote(...)(fn).remote(*args)`` defers ``fn(*args)``; ``ray.wait`` answers the oldest; ``ray.get`` runs it.
    The stage imports ``ray`` inside ``run_stage``, which finds this in ``sys.modules``."""

    def remote(**_options: Any) -> Any:
        def wrap(fn: Any) -> Any:
            def submit(*args: Any) -> _Ref:
                calls.append((args[2], args[3]))  # (trial id, number) in launch order
                return _Ref(fn, args)

            return types.SimpleNamespace(remote=submit)

        return wrap

    return types.SimpleNamespace(
        remote=remote,
        wait=lambda refs, num_returns, timeout: (refs[:1], refs[1:]),
        get=lambda ref: ref.fn(*ref.args),
    )


def _relaunch(spec: Any, params: dict[str, Any], trial_id: str, number: int, owner: str | None) -> Any:
    if number == 2:
        raise RuntimeError("the worker died")
    rec = replace(trial(number, 100.0 + number), trial_id=trial_id)
    return rec.to_json(), f"log of {trial_id}"


def _lost(number: int, trial_id: str, params: dict[str, Any], why: str) -> TrialRecord:
    rec = trial(number, None)
    return replace(rec, trial_id=trial_id, params=params, failure=FailureKind.UNKNOWN, message=why)


def test_a_stage_relaunches_in_order_stores_each_run_and_records_a_lost_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, int]] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(calls))
    spec = load_study(SMOKE)
    store = FinalistStore(tmp_path)
    plan = StagePlan(stage=1, finalists=(1, 2), rounds=2)
    trials = {n: trial(n, 100.0 + n) for n in (1, 2)}
    said: list[str] = []
    kw: dict[str, Any] = {"relaunch": _relaunch, "lost": _lost, "owner": None, "concurrency": 1, "say": said.append}
    made = run_stage(spec, plan, trials, store, **kw)
    assert calls == [("t1-f1r1", 1), ("t2-f1r1", 2), ("t1-f1r2", 1), ("t2-f1r2", 2)]
    assert [r.key for r in made] == [(1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2)]
    assert [r.key for r in store.load()] == [r.key for r in made]
    lost = [r.record for r in made if r.repeats == 2]
    assert all(r.outcome is TrialOutcome.FAILED and "RuntimeError: the worker died" in r.message for r in lost)
    assert (tmp_path / "logs" / "0001-t1-f1r1.log").read_text() == "log of t1-f1r1"
    assert "2 round(s), 4 relaunch(es) to run" in said[0]
    assert run_stage(spec, plan, trials, store, **kw) == []  # a complete stage runs nothing again


def test_a_halted_stage_starts_no_relaunch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(calls))
    plan = StagePlan(stage=1, finalists=(1,), rounds=2)
    made = run_stage(
        load_study(SMOKE),
        plan,
        {1: trial(1, 101.0)},
        FinalistStore(tmp_path),
        relaunch=_relaunch,
        lost=_lost,
        owner=None,
        concurrency=2,
        say=lambda _text: None,
        halted=lambda: True,
    )
    assert made == [] and calls == []


def test_a_relaunch_whose_node_is_lost_runs_again_and_is_not_stored_as_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relaunch interrupted by the loss of its slot's node (NodeLostError) runs again in its place in the order; one
    lost every time is stored as a failed run after NODE_LOST_RETRIES further tries (the stage ends)."""
    from autotune.core.errors import NodeLostError
    from autotune.finalists.stage import NODE_LOST_RETRIES

    calls: list[tuple[str, int]] = []
    monkeypatch.setitem(sys.modules, "ray", _fake_ray(calls))
    interrupted: set[str] = set()

    def relaunch(spec: Any, params: dict[str, Any], trial_id: str, number: int, owner: str | None) -> Any:
        if number == 2 or trial_id not in interrupted:  # trial 2: always; trial 1: its first try of each round
            interrupted.add(trial_id)
            raise NodeLostError(f"trial {number} ({trial_id}): node n1 lost mid-trial; it is retried on another slot")
        return replace(trial(number, 100.0 + number), trial_id=trial_id).to_json(), ""

    said: list[str] = []
    made = run_stage(
        load_study(SMOKE),
        StagePlan(stage=1, finalists=(1, 2), rounds=1),
        {n: trial(n, 100.0 + n) for n in (1, 2)},
        FinalistStore(tmp_path),
        relaunch=relaunch,
        lost=_lost,
        owner=None,
        concurrency=1,
        say=said.append,
    )
    assert calls == [("t1-f1r1", 1)] * 2 + [("t2-f1r1", 2)] * (1 + NODE_LOST_RETRIES)
    one, two = made
    assert one.repeats == 1 and one.record.failure is None  # the interrupted try is not stored
    assert two.repeats == 2 and two.record.outcome is TrialOutcome.FAILED and "NodeLostError" in two.record.message
    # a line for each try that runs again (1 of trial 1, NODE_LOST_RETRIES of trial 2), then trial 2's failed run
    assert sum("node n1 lost mid-trial" in line for line in said) == 1 + NODE_LOST_RETRIES + 1
    assert "failed" in said[-1] and "trial 2" in said[-1]


def test_a_relaunch_that_raised_is_said_in_one_line() -> None:
    """Ray's error text carries the task's traceback; the stage's result line stays one line."""
    from autotune.finalists.outcome import FinalistRun
    from autotune.finalists.stage import fmt_run

    rec = _lost(1, "t1-f1r1", {}, 'the relaunch raised RayTaskError: ray::relaunch()\n  File "runner.py", line 9')
    line = fmt_run(FinalistRun(stage=1, round=1, repeats=1, repeats_trial_id="t1", record=rec), "tok@max")
    assert "\n" not in line and line.endswith('ray::relaunch() File "runner.py", line 9')
