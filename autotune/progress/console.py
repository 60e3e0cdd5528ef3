"""What the operator sees while a study runs.

A line when a trial starts (n of N, its params), a line per phase (launching, ready after X s, benchmarking level k of
m, tearing down), a line when it finishes, each with the study's running ETA. On a terminal a status line at the bottom
is redrawn in place (running trials, their phases and elapsed times, ETA); in a log every event is one line.
``quiet`` prints only errors and the end result; ``verbose`` adds Ray's and Tune's own output (see ``noise``).
"""

from __future__ import annotations

import enum
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import IO

from autotune.export.accessors import compact_params
from autotune.progress.eta import eta_seconds, fmt_duration
from autotune.progress.events import Phase, TrialEvent
from autotune.trial.records import TrialRecord


class Verbosity(int, enum.Enum):
    QUIET = 0
    NORMAL = 1
    VERBOSE = 2


def fmt_record(r: TrialRecord) -> str:
    head = f"trial {r.number:3d} [{r.trial_id}] {r.outcome.value:8s}"
    if r.failure is not None:
        message = " ".join(r.message.split())  # one line: Ray's errors carry the task's traceback
        return f"{head} {r.failure.value}: {message[:160]}"
    objs = ", ".join(f"{k}={v:,.1f}" for k, v in r.objectives.items())
    wall = f" ({r.phases.trial_wall_s:.0f} s)" if r.phases.trial_wall_s else ""
    return f"{head} {objs} {'feasible' if r.feasible else 'INFEASIBLE'}{wall}  {json.dumps(r.params, default=str)}"


@dataclass
class _Running:
    ordinal: int  # n of N in this run
    started: float  # epoch seconds
    phase: Phase = Phase.STARTED
    detail: str = ""


@dataclass
class Console:
    out: IO[str] = field(default_factory=lambda: sys.stdout)
    err: IO[str] = field(default_factory=lambda: sys.stderr)
    verbosity: Verbosity = Verbosity.NORMAL
    tty: bool | None = None  # None: ask ``out``
    clock: object = time.time  # a seam for tests

    def __post_init__(self) -> None:
        if self.tty is None:
            self.tty = bool(getattr(self.out, "isatty", lambda: False)())
        self._lock = threading.RLock()
        self._status_shown = False
        self.planned = 0  # trials this run starts
        self.concurrency = 1
        self.started = 0
        self.finished = 0
        self.trial_s: list[float] = []
        self.start_until: float | None = None  # epoch seconds after which no trial starts (the time box), if any
        self.running: dict[int, _Running] = {}
        self.done: set[int] = set()  # finished trials: a late event of theirs is not a new trial
        self.relaunch_planned: int | None = None  # set when the finalist stage starts: events are then relaunches'
        self.relaunch_started = 0
        self.relaunches: dict[str, _Running] = {}  # running finalist relaunches, by their trial id
        self.relaunch_ordinals: dict[str, int] = {}  # k of K of every relaunch started (one rerun keeps its k)

    # Ray Tune pickles the searcher, whose callbacks reach this console: it pickles without its streams and lock.
    def __getstate__(self) -> dict[str, object]:
        return {k: v for k, v in self.__dict__.items() if k not in ("out", "err", "_lock", "clock")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self.out, self.err, self.clock = sys.stdout, sys.stderr, time.time
        self._lock = threading.RLock()

    # --- plain output ------------------------------------------------------------------------------------------
    def _now(self) -> float:
        return float(self.clock())  # type: ignore[operator]  # clock is a test seam typed object; it holds a time.time-like callable

    def _write(self, stream: IO[str], text: str) -> None:
        with self._lock:
            self._clear_status()
            stream.write(text + "\n")
            stream.flush()
            self._draw_status()

    def say(self, text: str) -> None:
        """A line of the study's story (headers, resume notes); not shown with ``--quiet``."""
        if self.verbosity >= Verbosity.NORMAL:
            self._write(self.out, text)

    def result(self, text: str) -> None:
        """The end result (summary table, best trial): shown at every verbosity."""
        self._write(self.out, text)

    def error(self, text: str) -> None:
        self._write(self.err, text)

    def _event_line(self, text: str) -> None:
        if self.verbosity >= Verbosity.NORMAL:
            stamp = time.strftime("%H:%M:%S", time.localtime(self._now()))
            self._write(self.out, f"{stamp} {text}")

    # --- the study -----------------------------------------------------------------------------------------------
    def study_started(
        self,
        planned: int,
        concurrency: int,
        known_trial_s: list[float] | None = None,
        start_until: float | None = None,
    ) -> None:
        self.planned = planned
        self.concurrency = max(1, concurrency)
        self.trial_s = list(known_trial_s or [])
        self.start_until = start_until

    def eta(self) -> float | None:
        now = self._now()
        return eta_seconds(
            trial_s=self.trial_s,
            running_elapsed=[now - r.started for r in self.running.values()],
            to_start=self.planned - self.started,
            concurrency=self.concurrency,
            start_within=None if self.start_until is None else self.start_until - now,
        )

    def _eta_text(self) -> str:
        eta = self.eta()
        if eta is None:
            return "ETA after the first trial"
        return f"ETA {fmt_duration(eta)}"

    def relaunches_started(self, planned: int) -> None:
        """The finalist stage begins, with ``planned`` relaunches: the events from now on are theirs."""
        with self._lock:
            self.relaunch_planned = planned
            self.relaunch_started = 0
            self.relaunch_ordinals = {}

    def on_event(self, event: TrialEvent) -> None:
        with self._lock:
            if self.relaunch_planned is not None:
                self._on_relaunch_event(event)
            elif event.number not in self.done and event.phase is not Phase.ENDED:  # a trial ends with its record
                run = self.running.get(event.number)
                if run is None:
                    self.started += 1
                    run = self.running[event.number] = _Running(self.started, event.at)
                self._phase_line(f"trial {event.number:3d}", run, event, f"{run.ordinal}/{self.planned}")
            self._draw_status()

    def _on_relaunch_event(self, event: TrialEvent) -> None:
        if event.phase is Phase.ENDED:  # its result line comes from the finalist stage
            self.relaunches.pop(event.trial_id, None)
            return
        run = self.relaunches.get(event.trial_id)
        if run is None:  # new, or run again under its id after its node was lost (its ENDED came first)
            if event.trial_id not in self.relaunch_ordinals:
                self.relaunch_started += 1
                self.relaunch_ordinals[event.trial_id] = self.relaunch_started
            run = self.relaunches[event.trial_id] = _Running(self.relaunch_ordinals[event.trial_id], event.at)
        self._phase_line(
            f"finalist relaunch of trial {event.number} [{event.trial_id}]",
            run,
            event,
            f"{run.ordinal}/{self.relaunch_planned}",
        )

    def _phase_line(self, who: str, run: _Running, event: TrialEvent, n_of_n: str) -> None:
        run.phase = event.phase
        run.detail = ""
        if event.phase is Phase.STARTED:
            params = compact_params(event.params, shorten_paths=False)
            eta = f"  ({self._eta_text()})" if self.relaunch_planned is None else ""
            self._event_line(f"{who} started [{n_of_n}]  {params}{eta}")
        elif event.phase is Phase.LAUNCHING:
            self._event_line(f"{who} launching the engine")
        elif event.phase is Phase.READY:
            took = f" after {event.seconds:.1f} s" if event.seconds is not None else ""
            self._event_line(f"{who} ready{took}")
        elif event.phase is Phase.BENCHMARKING:
            run.detail = f"{event.level}/{event.levels}"
            at = f"concurrency {event.concurrency}" if isinstance(event.concurrency, int) else str(event.concurrency)
            self._event_line(f"{who} benchmarking level {event.level} of {event.levels} ({at})")
        elif event.phase is Phase.TEARING_DOWN:
            self._event_line(f"{who} tearing down")

    def on_record(self, record: TrialRecord) -> None:
        with self._lock:
            run = self.running.pop(record.number, None)
            self.done.add(record.number)
            if run is None:  # finished without a STARTED event (e.g. the monitor was not reachable)
                self.started += 1
            self.finished += 1
            wall = record.phases.trial_wall_s
            if wall is None and run is not None:
                wall = self._now() - run.started
            if wall:
                self.trial_s.append(wall)
            if self.verbosity >= Verbosity.NORMAL:
                self._event_line(f"{fmt_record(record)}")
                left = self.planned - self.finished
                self._event_line(
                    f"progress: {self.finished}/{self.planned} done, {len(self.running)} running, "
                    f"{max(left, 0)} left; {self._eta_text()}"
                    if left > 0
                    else f"progress: {self.finished}/{self.planned} done"
                )
            self._draw_status()

    # --- the status line (terminals only) ------------------------------------------------------------------------
    def status_text(self) -> str:
        now = self._now()
        if self.relaunch_planned is not None:
            parts = [f"finalist stage: {self.relaunch_started}/{self.relaunch_planned} relaunches started"]
            runs = [(f"#{tid}", run) for tid, run in sorted(self.relaunches.items())]
        else:
            parts = [f"{self.finished}/{self.planned} done"]
            runs = [(f"#{number}", run) for number, run in sorted(self.running.items())]
        for name, run in runs:
            detail = f" {run.detail}" if run.detail else ""
            parts.append(f"{name} {run.phase.value}{detail} {fmt_duration(now - run.started)}")
        if self.relaunch_planned is None:
            parts.append(self._eta_text())
        return " | ".join(parts)

    def _draw_status(self) -> None:
        if not self.tty or self.verbosity < Verbosity.NORMAL:
            return
        if self.relaunch_planned is not None:
            if not self.relaunches:
                return
        elif not (self.running or self.started) or (self.finished >= self.planned and not self.running):
            return
        self.out.write("\r\x1b[K" + self.status_text()[: self._width() - 1])
        self.out.flush()
        self._status_shown = True

    def _width(self) -> int:
        """The terminal's columns: a longer status line would wrap, and ``\\r`` redraws only its last row."""
        try:
            columns = os.get_terminal_size(self.out.fileno()).columns
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
            columns = 0
        return columns or shutil.get_terminal_size().columns  # COLUMNS, else 80

    def _clear_status(self) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[K")
            self._status_shown = False

    def tick(self) -> None:
        """Redraw the status line (elapsed times move); the driver calls it about once a second."""
        with self._lock:
            if self._status_shown or self.running or self.relaunches:
                self._clear_status()
                self._draw_status()

    def close(self) -> None:
        with self._lock:
            self._clear_status()
            self.out.flush()
