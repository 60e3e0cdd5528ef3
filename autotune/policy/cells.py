"""Set aside a proposal whose settings, the memory fraction aside, a launch already tried, while some are untried.

A cell is a point's values of every parameter but the real-valued ones (floats, and categoricals whose choices are all
floats: the memory fraction). While the listed space has a cell no completed launch holds, a proposal (the sampler's,
the model's, the walk's) in a cell that a completed launch holds is set aside, so each launch tries
settings no launch has tried; the repair still gives each one the memory its load needs. Once every cell is held, or
where the space cannot be listed, it sets nothing aside; and when nothing else is left to launch (the cells left
cannot be launched), the proposer relaxes it (``relax``) and it sets nothing aside from then on. On a space without a
real-valued parameter a cell is one point, so the rule adds nothing to ``Repeats``. Issue #29's round 13 kept it
(``docs/decisions/0018-round-13-issue-29.md``)."""

from __future__ import annotations

import json
from collections.abc import Collection

from autotune.policy.base import Params, Rule, Told
from autotune.space import StudySpec
from autotune.space.enumerate import finite_points
from autotune.trial.records import TrialRecord

LIST_LIMIT = 200_000  # a space of more points than this is not listed: the rule is off


class NewCells(Rule):
    name = "new-cells"

    def __init__(self, spec: StudySpec) -> None:
        self.real = {
            p.name
            for p in spec.params
            if p.type == "float" or (p.choices and all(isinstance(c, float) for c in p.choices))
        }
        points = finite_points(spec, LIST_LIMIT) if self.real else None
        self.cells = len({self._cell(p) for p in points}) if points else 0  # 0: off
        self.held: set[str] = set()

    def _cell(self, params: Params) -> str:
        return json.dumps({k: v for k, v in params.items() if k not in self.real}, sort_keys=True, default=str)

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        if len(self.held) >= self.cells:
            return None
        if self._cell(params) in self.held:  # a running launch holds nothing (it may fail)
            return "new-cells: a launch already tried these settings but the real-valued ones"
        return None

    def relax(self) -> bool:
        was_on = len(self.held) < self.cells
        self.cells = 0  # off for the rest of the study
        return was_on

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.restore(params, told)

    def restore(self, params: Params, told: Told) -> None:
        if told.failure is None:
            self.held.add(self._cell(params))
