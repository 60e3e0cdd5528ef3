"""The study's time box (``--stop-after-s``): how long the finalist stage needs, estimated from the study's own trial
times, so that the search stops early enough to leave it that time; and what the user is told about it.

The searcher asks ``reserve_s`` before each new trial (``OptunaStudySearcher(reserve_s=...)``); the driver feeds each
complete trial's wall time in (``add_trial``, ``relaunch_wall``) and prints what this returns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from autotune.space import StudySpec
from autotune.trial.records import TrialOutcome, TrialRecord


def relaunch_wall(record: TrialRecord) -> float | None:
    """A trial's wall time as an estimate of one finalist relaunch, or None: only a trial that ran its whole benchmark
    counts (a finalist is one that did), not a launch that failed in seconds or a point rejected before launch."""
    wall = record.phases.trial_wall_s
    return float(wall) if wall and record.outcome is TrialOutcome.COMPLETE else None


def stage_launches(spec: StudySpec) -> int:
    """Relaunches a finalist stage makes: the finalists and the baseline, each ``rounds`` times."""
    if spec.finalists.count <= 0:
        return 0
    return (spec.finalists.count + (1 if spec.baseline is not None else 0)) * spec.finalists.rounds


@dataclass
class TimeBox:
    """``stop_after_s`` (None: no time box) against the finalist stage's ``launches`` relaunches, run ``at_once``
    at a time, each taking about the study's median complete trial's wall time (launch + benchmark)."""

    stop_after_s: float | None
    launches: int
    at_once: int = 1  # relaunches (trials) run at once
    trial_walls: list[float] = field(
        default_factory=list
    )  # wall seconds of this study's complete trials (relaunch_wall)
    no_stage_room: str = ""  # set when the box cannot hold the finalist stage: what the user gives up

    def reserve_s(self) -> float:
        """The time the finalist stage needs; 0 until a trial has finished, and 0 once the box is known too short to
        hold the stage (the search then runs the whole box)."""
        if not self.trial_walls or self.no_stage_room:
            return 0.0
        walls = sorted(self.trial_walls)
        per = walls[len(walls) // 2]
        return per * math.ceil(self.launches / max(1, self.at_once))

    def check(self) -> str:
        """Once the first trial's time is known: whether the box can hold the finalist stage. Returns the message to
        print when it cannot (said once; ``""`` otherwise)."""
        if self.stop_after_s is None or not self.trial_walls or self.no_stage_room or not self.launches:
            return ""
        need = self.trial_walls[0] + self.reserve_s()
        if need > self.stop_after_s:
            self.no_stage_room = (
                f"--stop-after-s {self.stop_after_s:g} cannot hold the finalist stage: one trial took "
                f"{self.trial_walls[0]:.0f} s here, so the stage's {self.launches} relaunches need about "
                f"{self.reserve_s():.0f} s more. The search runs the whole time box and the finalist stage is "
                f"skipped: the export rests on single launches (no relaunch means, no tie test). Give at least "
                f"{math.ceil(need * 1.5)} s to keep it."
            )
            return self.no_stage_room
        return ""

    def add_trial(self, wall_s: float) -> str:
        """A finished trial's wall time; after the first, what ``check`` says."""
        first = not self.trial_walls
        self.trial_walls.append(float(wall_s))
        return self.check() if first else ""

    def start_text(self) -> str:
        """What the study says at its start about the box, or ``""`` without a box or a finalist stage."""
        if self.stop_after_s is None or not self.launches:
            return ""
        return (
            f"--stop-after-s {self.stop_after_s:g}: the search stops in time to leave the finalist stage "
            f"({self.launches} relaunches) its time, estimated from this study's own trial times"
            + (f" (now {self.reserve_s():.0f} s)" if self.trial_walls else " once the first finishes")
        )

    def stopped_note(self, done: int, trials: int) -> str:
        """The banner of a run the box ended before the study's budget: ``done`` of ``trials`` trials finished."""
        kept = "" if self.no_stage_room else f" (the last {self.reserve_s():.0f} s of it kept for the finalist stage)"
        return (
            f"STOPPED by --stop-after-s {self.stop_after_s:g}{kept}: no new trial started after that; "
            f"{done} of {trials} trial(s) done. Rerun the same command to continue."
        )

    @property
    def skipped_text(self) -> str:
        """Said instead of running a finalist stage the box cannot hold."""
        return (
            "finalist stage skipped: --stop-after-s is too short to hold it (rerun the command, or "
            "--finalists-only, to run it)"
        )
