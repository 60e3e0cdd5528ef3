"""Round 15 of issue #29 (a candidate): ``best-cell``, the searcher with ``new-cells`` leaving the best launch's cell
open.

``autotune.policy.cells.NewCells`` sets aside every proposal in a cell a completed launch holds while some cell is
untried. So once the searcher has launched the best cell at a poor memory fraction, no launch can try that cell again
until every cell is held (51 cells on ``h200-tp1-speculative``: more than the 40 launches). Here the cell of the best
measured feasible launch (the first objective, in its direction) is not set aside: the sampler or the model may
launch it again at another real-valued setting when they propose it. No proposal is forced there; every other held
cell stays set aside as before.
"""

from __future__ import annotations

from collections.abc import Collection

from autotune.policy.base import Params, Rules, Told
from autotune.policy.cells import NewCells
from autotune.space import StudySpec


class BestCellOpen(NewCells):
    name = "new-cells"  # it replaces the product's rule in place

    def __init__(self, spec: StudySpec) -> None:
        super().__init__(spec)
        self.maximize = spec.objectives[0].direction == "maximize"
        self.best: tuple[float, str] | None = None  # (value, cell) of the best measured feasible launch

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        if self.best is not None and self._cell(params) == self.best[1]:
            return None
        return super().set_aside(params, running)

    def restore(self, params: Params, told: Told) -> None:
        super().restore(params, told)
        if told.failure is None and told.feasible and told.values:
            v = told.values[0]
            if self.best is None or (v > self.best[0] if self.maximize else v < self.best[0]):
                self.best = (v, self._cell(params))


def with_best_cell(spec: StudySpec, rules: Rules) -> Rules:
    """``rules`` with ``NewCells`` replaced by ``BestCellOpen`` in its place."""
    return Rules([BestCellOpen(spec) if isinstance(r, NewCells) else r for r in rules])
