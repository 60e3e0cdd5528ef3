"""Round 31's candidate (issue #29): while no launch is feasible, the model looks for a first feasible one by the
constraints' measured margins.

The searcher's model (``autotune.study.model_proposer``) scores a point, while no measured launch is feasible, by its
optimistic value times its chance of a feasible launch from a GP fitted to the launches' feasibility (+1 / -1). With
every launch at -1 that chance says only how far a point is from the launches, so the model's turns go to the
highest-valued points far from them: on a ``capacity`` landscape whose TTFT bound wants a large running cap and whose
TPOT bound a small one, the large caps (e.g. ``speculative`` #197: no feasible launch in 40, five seeds of five).
Constrained Bayesian optimisation looks for a first feasible point by the chance that every constraint is met, read
off one model a constraint (Gelbart, Snoek and Adams, 2014). ``FirstFeasible`` is the searcher except that, while no
measured launch is feasible, the chance of a feasible launch is round 23's (``constraint_gp``): one GP a constraint
fitted to the completed launches' margins to its bound, times the searcher's chance of a launch that completes. Once
any launch is feasible it is the searcher, launch for launch. Nothing in it is set per landscape or family.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np

from autotune.policy.base import Params
from autotune.space import objective_key
from autotune.study.gp import Hyper, normal_cdf
from autotune.study.model_proposer import Encoder, ModelProposer
from autotune.trial.score import UNMEASURED_VIOLATION


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


class FirstFeasible(ModelProposer):
    """The searcher's proposer with, while no launch is feasible, the chance of a feasible launch from the
    constraints' margins (module docstring)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._margin_hyper: dict[str, Hyper | None] = {}
        self.margin_picks = 0  # the model's picks made by the margins (none once a launch is feasible)

    def _model_pick(self, running: Collection[str]) -> Params | None:
        self._told_now = list(self.measured.values())
        return super()._model_pick(running)

    def _feasible_chance(self, x: np.ndarray, feasible: np.ndarray, enc: Encoder, grid: np.ndarray) -> np.ndarray:
        if feasible.any() or len(feasible) < 2:
            return super()._feasible_chance(x, feasible, enc, grid)
        told = self._told_now
        margins: dict[str, list[float | None]] = {}
        for c in self.spec.constraints:
            key = objective_key(c.metric, c.level)
            margins[key] = [margin(t.constraints.get(key, 0.0), c.min, c.max) for t in told]
        done = np.array([all(m[i] is not None for m in margins.values()) for i in range(len(told))])
        if not margins or done.sum() < 2:
            return super()._feasible_chance(x, feasible, enc, grid)
        chance = np.ones(len(grid))
        if not done.all():  # the chance the launch completes: the searcher's +1 / -1 GP on completed or not
            chance = super()._feasible_chance(x, done.astype(float), enc, grid)
        for key, m in margins.items():
            y = np.array([v for v, ok in zip(m, done, strict=True) if ok], dtype=float)
            if np.ptp(y) == 0.0:  # every completed launch at the same margin: nothing to tell points apart
                continue
            gp = self._gp(x[done], y, enc.groups, self._np_rng, self._margin_hyper.get(key))
            self._margin_hyper[key] = gp.hyper
            mu, sd = gp.predict(grid)
            chance = chance * normal_cdf(-mu / np.sqrt(sd * sd + gp.noise_var))
        self.margin_picks += 1
        return chance
