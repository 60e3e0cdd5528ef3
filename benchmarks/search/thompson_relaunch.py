"""Round 25's candidate (issue #29): once a finite space is exhausted, relaunch by Thompson sampling.

When every point of a listed space has been launched, the searcher spends the rest of its budget launching measured
points again: the sampler's proposal when it was measured feasible, else the best measured point. TPE proposes where
its good group is, and that group is made of single noisy measurements, so the relaunches gather on a few points; a
point whose one measurement came out low is not measured again, and the export (which pools a point's measurements)
does not pick it. ``ThompsonRelaunch`` is the searcher's proposer except for those relaunches: each is the measured
feasible point whose draw from its posterior is highest, the posterior being the mean of the point's own measurements
(the model's scale: the logarithm of the first objective, signed) with the variance the measurement noise over the
number of its measurements; the noise is the one the model's GP fits to every measurement so far. A point gets
relaunched in proportion to its chance of being the best, as the measurements say it. Until the space is exhausted
the run is the searcher's, launch for launch. Nothing in it is set per landscape or family.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from autotune.policy.base import Params, Told, params_key
from autotune.study.model_proposer import ModelProposer, targets


class ThompsonRelaunch(ModelProposer):
    """The searcher's proposer with the relaunches after exhaustion drawn by Thompson sampling (module docstring)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._values: dict[str, list[float]] = {}  # each point's measured first objective, every launch of it
        self._draws = np.random.default_rng([self.spec.seed or 0, 25])

    def told(self, params: Params, told: Told) -> None:
        super().told(params, told)
        if told.failure is None and told.values and math.isfinite(told.values[0]):
            self._values.setdefault(params_key(params), []).append(float(told.values[0]))

    def _measured_like(self, params: Params) -> Params:
        pick = self._thompson()
        return pick if pick is not None else super()._measured_like(params)

    def _thompson(self) -> Params | None:
        listed = self._listed()
        keys = [k for k, v in self._values.items() if v and self.measured[k].feasible]
        if listed is None or len(keys) < 2:
            return None
        _, enc, _ = listed
        every = [(k, v) for k in self._values for v in self._values[k]]
        y, _ = targets(np.array([v for _, v in every], dtype=float), self.spec, 0)
        x = enc.encode([json.loads(k) for k, _ in every])
        noise = self._gp(x, y, enc.groups, self._np_rng, self._hyper).noise_var
        at = {}
        for (k, _), yi in zip(every, y, strict=True):
            at.setdefault(k, []).append(float(yi))
        means = np.array([np.mean(at[k]) for k in keys])
        counts = np.array([len(at[k]) for k in keys], dtype=float)
        draw = means + self._draws.normal(size=len(keys)) * np.sqrt(noise / counts)
        return json.loads(keys[int(np.argmax(draw))])
