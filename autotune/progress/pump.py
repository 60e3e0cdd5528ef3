"""The driver's side of the progress channel: create the study monitor, pump its events into the console, and turn
a finished trial's record into the event the monitor counts."""

from __future__ import annotations

import logging
import math
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from autotune.progress import monitor
from autotune.progress.console import Console
from autotune.progress.events import Phase, TrialEvent
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord
from autotune.trial.score import objective_key

log = logging.getLogger(__name__)


def _primary(spec: StudySpec) -> tuple[str, str]:
    first = spec.objectives[0]
    return objective_key(first.metric, first.level), first.direction


def finished_event(spec: StudySpec, record: TrialRecord) -> TrialEvent:
    key, _ = _primary(spec)
    value = record.objectives.get(key)
    objective = float(value) if record.feasible and value is not None and math.isfinite(value) else None
    levels = record.bench.levels if record.bench is not None else ()
    return TrialEvent(
        number=record.number,
        trial_id=record.trial_id,
        phase=Phase.FINISHED,
        outcome=record.outcome.value,
        failure=record.failure.value if record.failure else "",
        objective=objective,
        throughput={
            lv.concurrency: float(lv.output_tok_per_s)
            for lv in levels
            if math.isfinite(lv.output_tok_per_s) and not lv.load
        },
    )  # concurrency levels


def create_monitor(spec: StudySpec, owner: str, *, planned: int, records: Sequence[TrialRecord]) -> Any:
    """The study's monitor actor, its counters starting from the trials an earlier run kept."""
    key, direction = _primary(spec)
    counts = Counter(f"{r.outcome.value}:{r.failure.value if r.failure else ''}" for r in records)
    values = [finished_event(spec, r).objective for r in records]
    feasible = [v for v in values if v is not None]
    best = (max(feasible) if direction == "maximize" else min(feasible)) if feasible else None
    return monitor.create(
        owner, study=spec.name, objective=key, direction=direction, planned=planned, finished=dict(counts), best=best
    )


class EventPump:
    """A thread that drains the monitor's events into the console (and redraws its status line) while Tune runs."""

    def __init__(self, handle: Any, console: Console, interval_s: float = 0.5) -> None:
        self.handle = handle
        self.console = console
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._pumping = threading.Lock()  # the thread and the driver's record callback both pump
        self._thread = threading.Thread(target=self._loop, name="autotune-progress", daemon=True)

    def __enter__(self) -> EventPump:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self.pump()  # what arrived after the last round
        self.console.close()

    def pump(self) -> None:
        import ray

        with self._pumping:
            try:
                events = ray.get(self.handle.drain.remote(), timeout=10)
            except Exception as exc:  # noqa: BLE001 - progress must never stop the study
                log.debug("progress events not read: %s", exc)
                return
            for data in events:
                self.console.on_event(TrialEvent.from_json(data))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.pump()
            self.console.tick()
