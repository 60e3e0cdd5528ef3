"""Run a finalist stage on the study's Ray cluster: each relaunch is a trial run (the same GPU slots and Serve path as
the search), in the stage's interleaved order, at most ``concurrency`` at once. Each finished relaunch is stored
(``FinalistStore``) before the next one is started; nothing is told to the sampler.

The stage does not know how a trial runs: the driver hands it ``relaunch`` (``autotune.study.runner.relaunch``, run
as a Ray task) and ``lost`` (the record of a relaunch that raised), so this package imports nothing of the study.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from autotune.core.errors import NodeLostError
from autotune.core.placement import on_node
from autotune.finalists.choice import missing_slots, run_trial_id
from autotune.finalists.outcome import FinalistRun, StagePlan
from autotune.finalists.store import FinalistStore
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord


class Relaunch(Protocol):
    """One relaunch of a trial's params, as a Ray task runs it: the record as JSON (it crosses Ray) and the log."""

    def __call__(
        self, spec: StudySpec, params: dict[str, Any], trial_id: str, number: int, owner: str | None
    ) -> tuple[dict[str, Any], str]: ...


NODE_LOST_RETRIES = 3  # how often a relaunch runs again after its slot's node was lost (as Ray Tune reruns a trial)

# The failed record of a relaunch that raised: (number, trial id, params, why) -> record.
Lost = Callable[[int, str, dict[str, Any], str], TrialRecord]


def fmt_run(run: FinalistRun, key: str) -> str:
    rec = run.record
    head = f"finalist stage {run.stage} round {run.round}: trial {run.repeats} [{rec.trial_id}]"
    if rec.failure is not None:
        return f"{head} {rec.outcome.value} {rec.failure.value}: {' '.join(rec.message.split())[:160]}"  # one line
    value = rec.objectives.get(key)
    text = f"{key}={value:,.1f}" if isinstance(value, (int, float)) else f"{key}=-"
    return f"{head} {text} {'feasible' if rec.feasible else 'INFEASIBLE'}"


def run_stage(
    spec: StudySpec,
    plan: StagePlan,
    trials: Mapping[int, TrialRecord],
    store: FinalistStore,
    *,
    relaunch: Relaunch,
    lost: Lost,
    owner: str | None,
    concurrency: int,
    say: Callable[[str], None],
    halted: Callable[[], bool] = lambda: False,
    node_id: str | None = None,
) -> list[FinalistRun]:
    """Launch every missing run of ``plan`` (resuming a stage a killed driver left); returns the runs made now.
    Once ``halted()`` (an interrupt), no further relaunch starts; those running finish and are stored. The relaunch
    tasks run on node ``node_id`` if given (the driver's: a lost GPU worker does not take one along); a relaunch whose
    slot's node is lost (``NodeLostError``) runs again, up to ``NODE_LOST_RETRIES`` times, and is not stored as a run
    of its config."""
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
    task = ray.remote(num_cpus=0.5, max_retries=0, **on_node(node_id))(relaunch)
    in_flight: dict[Any, tuple[int, int, str]] = {}
    node_lost: Counter[tuple[int, int]] = Counter()  # (round, trial) -> how often its slot's node was lost under it
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
            cause = getattr(exc, "cause", None) or exc  # Ray's RayTaskError carries the task's own exception
            if isinstance(cause, NodeLostError) and node_lost[rnd, number] < NODE_LOST_RETRIES:
                node_lost[rnd, number] += 1
                todo.insert(0, (rnd, number))  # its place in the plan's order: next
                say(f"finalist stage {plan.stage} round {rnd}: trial {number} [{tid}]: {cause}")
                continue
            record = lost(number, tid, dict(trial.params), f"the relaunch raised {type(exc).__name__}: {exc}")
        run = FinalistRun(stage=plan.stage, round=rnd, repeats=number, repeats_trial_id=trial.trial_id, record=record)
        store.append(run, log_text)  # durable before anything else
        made.append(run)
        say(fmt_run(run, key))
    return made
