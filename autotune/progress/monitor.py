"""The study monitor: a named Ray actor that trials send their progress events to, that the driver drains, and that
exports the study's state as Ray metrics (``ray.util.metrics``; names in ``docs/operating.md``).

Trials and Serve replicas find it by the study's owner tag (the absolute study directory), like the slot pool. Sending
is fire-and-forget and never fails a trial: without a monitor (a trial run outside the driver) events go nowhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import ray

from autotune.core.placement import on_node, this_node
from autotune.progress.events import Phase, TrialEvent

NAMESPACE = "autotune"  # explicit, so Serve replicas (namespace "serve") find the actor too
log = logging.getLogger(__name__)

# The metrics' names (Prometheus adds ``ray_`` in front, and ``_total`` to a counter); docs/operating.md lists them.
TRIALS_FINISHED = "autotune_trials_finished"
TRIALS_PLANNED = "autotune_trials_planned"
BEST_OBJECTIVE = "autotune_best_objective"
RUNNING_TRIALS = "autotune_running_trials"
LAST_TRIAL_THROUGHPUT = "autotune_last_trial_output_tok_per_s"
RUNNING_PHASES = (Phase.STARTED, Phase.LAUNCHING, Phase.READY, Phase.BENCHMARKING, Phase.TEARING_DOWN)


TRIAL, RELAUNCH = "trial", "finalist_relaunch"  # the ``kind`` label of RUNNING_TRIALS


def monitor_name(owner: str) -> str:
    return f"autotune-monitor-{owner}"


class RunningTable:
    """What runs now, by run (Tune's trial id, or a finalist relaunch's id): its phase and kind. A run leaves the table
    when it ends (ENDED from the runner) or its record is stored (FINISHED from the driver), whichever comes first."""

    def __init__(self) -> None:
        self.runs: dict[str, tuple[Phase, str]] = {}
        self.kind = TRIAL  # the kind of the runs that start from now on (the finalist stage runs after the trials)

    def update(self, event: TrialEvent) -> None:
        if event.phase in (Phase.ENDED, Phase.FINISHED):
            self.runs.pop(event.trial_id, None)
        else:
            kind = self.runs[event.trial_id][1] if event.trial_id in self.runs else self.kind
            self.runs[event.trial_id] = (event.phase, kind)

    def counts(self) -> dict[tuple[str, Phase], int]:
        """How many runs of each kind are in each running phase (zeros included)."""
        out = {(kind, phase): 0 for kind in (TRIAL, RELAUNCH) for phase in RUNNING_PHASES}
        for phase, kind in self.runs.values():
            out[kind, phase] += 1
        return out


@ray.remote(num_cpus=0)
class StudyMonitor:
    """Holds each running trial's phase, buffers events for the driver and keeps the study's metrics current."""

    def __init__(
        self, study: str, objective: str, direction: str, planned: int, finished: Mapping[str, int], best: float | None
    ) -> None:
        from ray.util import metrics

        self.study = study
        self.objective = objective
        self.maximize = direction == "maximize"
        self.best = best
        self.table = RunningTable()
        self.buffer: list[dict[str, Any]] = []
        tags = ("study",)
        self.m_finished = metrics.Counter(
            TRIALS_FINISHED,
            description="Trials finished, by outcome and failure kind.",
            tag_keys=(*tags, "outcome", "failure"),
        )
        self.m_planned = metrics.Gauge(
            TRIALS_PLANNED, description="Trials the study runs in all (kept + to run).", tag_keys=tags
        )
        self.m_best = metrics.Gauge(
            BEST_OBJECTIVE,
            description="Best primary objective of a feasible trial so far.",
            tag_keys=(*tags, "objective"),
        )
        self.m_running = metrics.Gauge(
            RUNNING_TRIALS,
            description="Trials (and finalist relaunches) running now, by phase.",
            tag_keys=(*tags, "phase", "kind"),
        )
        self.m_tput = metrics.Gauge(
            LAST_TRIAL_THROUGHPUT,
            description="Output tokens/s at each load level of the last completed trial.",
            tag_keys=(*tags, "concurrency"),
        )
        self.m_planned.set(planned, {"study": study})
        for key, count in finished.items():  # trials kept from an earlier run of the study
            outcome, _, failure = key.partition(":")
            self.m_finished.inc(count, {"study": study, "outcome": outcome, "failure": failure or "none"})
        if best is not None:
            self.m_best.set(best, {"study": study, "objective": objective})
        self._set_running()

    def _set_running(self) -> None:
        for (kind, phase), n in self.table.counts().items():
            self.m_running.set(n, {"study": self.study, "phase": phase.value, "kind": kind})

    def relaunches_started(self) -> None:
        """The finalist stage begins: the runs that start from now on are relaunches."""
        self.table.kind = RELAUNCH

    def publish(self, event_json: dict[str, Any]) -> None:
        event = TrialEvent.from_json(event_json)
        self.table.update(event)
        if event.phase is Phase.FINISHED:
            self.m_finished.inc(1, {"study": self.study, "outcome": event.outcome, "failure": event.failure or "none"})
            if event.objective is not None and (
                self.best is None or (event.objective > self.best if self.maximize else event.objective < self.best)
            ):
                self.best = event.objective
                self.m_best.set(self.best, {"study": self.study, "objective": self.objective})
            for c, tok_s in event.throughput.items():
                self.m_tput.set(tok_s, {"study": self.study, "concurrency": str(c)})
        else:
            self.buffer.append(event_json)  # the driver prints what trials send; it knows its own FINISHED
        self._set_running()

    def drain(self) -> list[dict[str, Any]]:
        out, self.buffer = self.buffer, []
        return out

    def running(self) -> dict[str, str]:
        return {run: phase.value for run, (phase, _) in self.table.runs.items()}


def create(
    owner: str,
    *,
    study: str,
    objective: str,
    direction: str,
    planned: int,
    finished: Mapping[str, int],
    best: float | None,
) -> Any:
    """The study's monitor (owned by the driver: it goes away with the driver), on the caller's node, so that a lost GPU
    worker does not take it along."""
    return StudyMonitor.options(name=monitor_name(owner), namespace=NAMESPACE, **on_node(this_node())).remote(  # type: ignore[attr-defined]  # @ray.remote makes the class an ActorClass; Ray's decorator is not typed as such
        study, objective, direction, planned, dict(finished), best
    )


_handles: dict[str, Any] = {}


def find(owner: str | None) -> Any | None:
    if not owner or not ray.is_initialized():
        return None
    handle = _handles.get(owner)
    if handle is None:
        try:
            handle = ray.get_actor(monitor_name(owner), namespace=NAMESPACE)
        except ValueError:
            return None
        _handles[owner] = handle
    return handle


def send(owner: str | None, event: TrialEvent) -> None:
    """Send ``event`` to the study's monitor, if there is one; never raises (progress is not worth a trial)."""
    try:
        handle = find(owner)
        if handle is not None:
            handle.publish.remote(event.to_json())
    except Exception as exc:  # noqa: BLE001 - a dead monitor (driver gone) must not fail the trial
        _handles.pop(owner or "", None)
        log.debug("progress event not sent: %s", exc)
