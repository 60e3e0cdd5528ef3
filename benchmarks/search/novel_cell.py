"""Round 13 of issue #29: ``novel-cell``, the searcher with one more set-aside: a proposal in a cell that a completed
launch (or a running one) already holds.

A cell is a point's values of every parameter but the real-valued ones (floats, and categoricals whose choices are
all floats: the memory fraction on the speculative spaces). While the space has a cell no completed launch holds, every
proposal (the sampler's, the model's, the walk's) is set aside when its cell is held, so each launch tries settings
other than the memory fraction that no launch has tried. Once every cell is held (or where the space cannot be
listed, never), nothing is set aside by it. On a space without a real-valued parameter a cell is one point, so the
rule is ``Repeats``'s and the candidate is the searcher.
"""

from __future__ import annotations

import json
from collections.abc import Collection

from autotune.policy.base import Params, Rule, Rules, Told
from autotune.space import StudySpec
from autotune.space.enumerate import finite_points
from autotune.trial.records import TrialRecord

LIST_LIMIT = 200_000


def _real_valued(spec: StudySpec) -> set[str]:
    return {
        p.name for p in spec.params if p.type == "float" or (p.choices and all(isinstance(c, float) for c in p.choices))
    }


class NovelCell(Rule):
    name = "novel-cell"

    def __init__(self, spec: StudySpec) -> None:
        self.real = _real_valued(spec)
        points = finite_points(spec, LIST_LIMIT) if self.real else None
        self.cells = len({self._cell(p) for p in points}) if points else 0  # 0: not listed, the rule is off
        self.held: set[str] = set()

    def _cell(self, params: Params) -> str:
        return json.dumps({k: v for k, v in params.items() if k not in self.real}, sort_keys=True, default=str)

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        if not self.cells or len(self.held) >= self.cells:
            return None
        cell = self._cell(params)
        if cell in self.held or any(self._cell(json.loads(k)) == cell for k in running):
            return "novel-cell: a launch already holds these settings but the real-valued ones"
        return None

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.restore(params, told)

    def restore(self, params: Params, told: Told) -> None:
        if told.failure is None:
            self.held.add(self._cell(params))


def with_novel_cell(spec: StudySpec, rules: Rules) -> Rules:
    """``rules`` with ``NovelCell`` after ``Repeats`` (the first set-aside reason wins)."""
    listed = list(rules)
    return Rules([*listed[:1], NovelCell(spec), *listed[1:]])
