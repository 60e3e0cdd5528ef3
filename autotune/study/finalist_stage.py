"""Run a finalist stage on the study's Ray cluster: each relaunch is a trial run (``runner.run_trial``, the same GPU
slots and Serve path as the search), in the stage's interleaved order, at most ``concurrency`` at once. Each finished
relaunch is stored (``FinalistStore``) before the next one is started; nothing is told to the sampler.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from autotune.finalists.choice import FinalistRun, StagePlan, missing_slots, run_trial_id
from autotune.finalists.store import FinalistStore
from autotune.space import StudySpec
from autotune.trial.records import FailureKind, TrialRecord


def _relaunch(
    spec: StudySpec, params: dict[str, Any], trial_id: str, number: int, owner: str | None
) -> tuple[dict[str, Any], str]:
    from autotune.study.runner import run_trial

    record, log_text = run_trial(spec, params, trial_id=trial_id, number=number, owner=owner)
    return record.to_json(), log_text


def _lost(spec: StudySpec, trial: TrialRecord, trial_id: str, why: str) -> TrialRecord:
    from autotune.study.runner import base_record, failed_record, now_iso

    rec = base_record(spec, None, trial_id=trial_id, number=trial.number, params=trial.params, started_at=now_iso())
    return failed_record(rec, spec, FailureKind.UNKNOWN, why)


def fmt_run(run: FinalistRun, key: str) -> str:
    rec = run.record
    head = f"finalist stage {run.stage} round {run.round}: trial {run.repeats} [{rec.trial_id}]"
    if rec.failure is not None:
        return f"{head} {rec.outcome.value} {rec.failure.value}: {rec.message[:160]}"
    value = rec.objectives.get(key)
    text = f"{key}={value:,.1f}" if isinstance(value, (int, float)) else f"{key}=-"
    return f"{head} {text} {'feasible' if rec.feasible else 'INFEASIBLE'}"


def run_stage(
    spec: StudySpec,
    plan: StagePlan,
    trials: Mapping[int, TrialRecord],
    store: FinalistStore,
    *,
    owner: str | None,
    concurrency: int,
    say: Callable[[str], None],
    halted: Callable[[], bool] = lambda: False,
) -> list[FinalistRun]:
    """Launch every missing run of ``plan`` (resuming a stage a killed driver left); returns the runs made now.
    Once ``halted()`` (an interrupt), no further relaunch starts; those running finish and are stored."""
    import ray

    key = spec.objectives[0].key
    store.save_plan(plan)
    todo = missing_slots(plan, store.load())
    if not todo:
        return []
    done_before = len(plan.slots()) - len(todo)
    say(
        f"finalist stage {plan.stage}: trials {', '.join(map(str, plan.finalists))}, {plan.rounds} round(s), "
        f"{len(todo)} relaunch(es) to run" + (f" ({done_before} kept from an interrupted run)" if done_before else "")
    )
    task = ray.remote(num_cpus=0.5, max_retries=0)(_relaunch)
    in_flight: dict[Any, tuple[int, int, str]] = {}
    made: list[FinalistRun] = []
    while todo or in_flight:
        if halted():
            todo.clear()
        while todo and len(in_flight) < max(1, concurrency):
            rnd, number = todo.pop(0)
            trial = trials[number]
            tid = run_trial_id(trial.trial_id, plan.stage, rnd)
            ref = task.remote(spec, dict(trial.params), tid, number, owner)
            in_flight[ref] = (rnd, number, tid)
        if not in_flight:
            break
        ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=1.0)
        if not ready:
            continue
        rnd, number, tid = in_flight.pop(ready[0])
        trial = trials[number]
        log_text = ""
        try:
            data, log_text = ray.get(ready[0])
            record = TrialRecord.from_json(json.loads(json.dumps(data)))
        except Exception as exc:  # noqa: BLE001 - a dead worker, a Ray error: recorded, the stage goes on
            if halted():
                continue  # an interrupt or a lost cluster, not the config's doing: not stored, rerun on resume
            record = _lost(spec, trial, tid, f"the relaunch raised {type(exc).__name__}: {exc}")
        run = FinalistRun(stage=plan.stage, round=rnd, repeats=number, repeats_trial_id=trial.trial_id, record=record)
        store.append(run, log_text)  # durable before anything else
        made.append(run)
        say(fmt_run(run, key))
    return made
