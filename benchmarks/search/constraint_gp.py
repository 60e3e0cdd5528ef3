"""Round 24's candidate (issue #29): the chance of a feasible launch from the measured margins of the constraints
that completed launches broke.

The searcher's model (``autotune.study.model_proposer``) reads each launch as feasible or not (+1 / -1) and fits a GP
to that. A launch says more: how far each constrained metric was from its bound (a TPOT at 60% of its bound, or at
140%). ``ConstraintModel`` is the searcher's proposer with the chance of a feasible launch taken, as in constrained
Bayesian optimisation, from one GP a constraint fitted to the completed launches' margins (the logarithm of the
metric over its bound for a positive bound, the excess over the bound's size otherwise), the chance that each is
within its bound read off its posterior with the noise it fitted, times the searcher's own chance (its +1 / -1 GP) of
a launch that completes (not failed, not invalid). Constraints are taken as independent. Only a constraint some
completed launch broke is modelled so; while none is broken the chance is the searcher's own, launch for launch (round
23's version modelled every constraint as soon as any launch failed or broke one, and lost 8 launches to 98% on
`memory-shapes`, where the launches that break are failures). Nothing in it is set per landscape or family.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from autotune.policy.base import Params
from autotune.study.gp import Hyper, normal_cdf
from autotune.study.model_proposer import Encoder, ModelProposer
from autotune.trial.score import UNMEASURED_VIOLATION, objective_key


def margin(value: float, lo: float | None, hi: float | None) -> float | None:
    """A constraint's measured excess (``<= 0`` within bounds) as a margin on a scale the bound sets: the logarithm
    of metric / bound for a single positive bound, the excess over the bound's size otherwise; None when unmeasured."""
    if value >= UNMEASURED_VIOLATION:
        return None
    if hi is not None and lo is None and hi > 0:
        return math.log(max(value + hi, hi * 1e-6) / hi)
    if lo is not None and hi is None and lo > 0:
        return math.log(lo / max(lo - value, lo * 1e-6))
    scale = max(abs(b) for b in (lo, hi) if b is not None) if (lo, hi) != (None, None) else 1.0
    return value / (scale or 1.0)


class ConstraintModel(ModelProposer):
    """The searcher's proposer with the chance of a feasible launch from the constraints' margins (module docstring)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._margin_hyper: dict[str, Hyper | None] = {}

    def _model_pick(self, running: Collection[str]) -> Params | None:
        self._told_now = list(self.measured.values())
        return super()._model_pick(running)

    def _feasible_chance(self, x: np.ndarray, feasible: np.ndarray, enc: Encoder, grid: np.ndarray) -> np.ndarray:
        told = self._told_now
        if feasible.all() or len(feasible) < 2:
            return np.ones(len(grid))
        margins: dict[str, list[float | None]] = {}
        for c in self.spec.constraints:
            key = objective_key(c.metric, c.level)
            margins[key] = [margin(t.constraints.get(key, 0.0), c.min, c.max) for t in told]
        done = np.array([all(m[i] is not None for m in margins.values()) for i in range(len(told))])
        broken = {k: m for k, m in margins.items() if any(v is not None and v > 0 for v in m)}
        if not broken or done.sum() < 2:  # no completed launch broke a constraint: the searcher's own chance
            return super()._feasible_chance(x, feasible, enc, grid)
        chance = np.ones(len(grid))
        if not done.all():  # the chance the launch completes: the searcher's +1 / -1 GP on completed or not
            chance = super()._feasible_chance(x, done.astype(float), enc, grid)
        for key, m in broken.items():
            y = np.array([v for v, ok in zip(m, done, strict=True) if ok], dtype=float)
            gp = self._gp(x[done], y, enc.groups, self._np_rng, self._margin_hyper.get(key))
            self._margin_hyper[key] = gp.hyper
            mu, sd = gp.predict(grid)
            chance = chance * normal_cdf(-mu / np.sqrt(sd * sd + gp.noise_var))
        return chance
