"""Round 12 of issue #29: ``cell-refine``, the searcher with the model's turn after a new best launch spent inside that
launch's cell.

A cell is a point's values of every parameter but the real-valued ones (floats, and categoricals whose choices are all
floats: the memory fraction on the speculative spaces). When the
best measured feasible launch is in a cell the candidate has not refined yet, the model's next turn picks, by the same
score as any model turn, among the cell's listed points whose repaired form was not launched; where there is none, the
turn is an ordinary one. Every other turn is the searcher's. On a space without a float parameter a cell is one point,
so the candidate is the searcher there.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

import numpy as np

from autotune.policy.base import Params, params_key
from autotune.study.model_proposer import ModelProposer


def _real_choices(choices: Any) -> bool:
    """Whether a categorical's choices are real numbers (a float parameter listed by hand)."""
    return bool(choices) and all(isinstance(c, float) for c in choices)


class CellRefine(ModelProposer):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._floats = {p.name for p in self.spec.params if p.type == "float" or _real_choices(p.choices)}
        self._refined: set[str] = set()
        self._within: list[int] | None = None
        self.refine_turns = 0

    def _cell(self, params: Params) -> str:
        return json.dumps({k: v for k, v in params.items() if k not in self._floats}, sort_keys=True, default=repr)

    def _incumbent(self) -> Params | None:
        sign = 1.0 if self.spec.objectives[0].direction == "maximize" else -1.0
        feasible = [(sign * t.values[0], k) for k, t in self.measured.items() if t.failure is None and t.feasible]
        return json.loads(max(feasible)[1]) if feasible else None

    def _model_pick(self, running: Collection[str]) -> Params | None:
        best = self._incumbent()
        listed = super()._listed()
        if self._floats and best is not None and listed is not None and self._cell(best) not in self._refined:
            cell = self._cell(best)
            self._refined.add(cell)
            points = listed[0]
            self._within = [
                i
                for i, p in enumerate(points)
                if self._cell(p) == cell and params_key(self._repaired(p)) not in self.measured
            ]
            try:
                pick = super()._model_pick(running) if self._within else None
            finally:
                self._within = None
            if pick is not None:
                self.refine_turns += 1
                return pick
        return super()._model_pick(running)

    def _listed(self) -> tuple[list[Params], Any, np.ndarray] | None:
        listed = super()._listed()
        if listed is None or self._within is None:
            return listed
        points, enc, grid = listed
        return [points[i] for i in self._within], enc, grid[self._within]
