"""Round 22's candidate (issue #29): the model sets the real-valued settings of the sampler's proposals.

``new-cells`` gives each cell (a point's values of every parameter but the real-valued ones: the memory fraction)
about one launch while cells are untried, so that launch should be at the fraction the model thinks best for the
cell. ``ModelFraction`` is the searcher's proposer, except that a proposal that is neither the model's own nor a seed
point (the sampler's, the walk's, the listing's), once the model proposes, is launched at the listed point of its cell
that the model's own score (expected improvement times the chance of a feasible launch) ranks first, repaired and
screened as any proposal; where none passes, or the model cannot be fitted, it is launched as proposed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

import numpy as np
import optuna

from autotune.core.failures import FailureKind
from autotune.policy.base import Params
from autotune.space.values import params_key
from autotune.study.gp import expected_improvement
from autotune.study.model_proposer import MODEL_AFTER, ModelProposer, targets


class ModelFraction(ModelProposer):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.real = {
            p.name
            for p in self.spec.params
            if p.type == "float" or (p.choices and all(isinstance(c, float) for c in p.choices))
        }
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        self.seeds = {params_key(t.params) for t in waiting} | {params_key(p) for p in self.deferred}
        self.moved = 0  # proposals launched at the model's fraction instead of their own

    def propose(self, running: Collection[str], *, left: int, finishing: bool) -> tuple[optuna.Trial, Params]:
        before = self.model_proposed
        trial, params = super().propose(running, left=left, finishing=finishing)
        key = params_key(params)
        if (
            not self.real
            or self.model_proposed > before
            or key in self.seeds
            or not self._on
            or self.exhausted
            or len(self.measured) < MODEL_AFTER
        ):
            return trial, params
        try:
            alt = self._cell_pick(params, running)
        except np.linalg.LinAlgError:
            return trial, params
        if alt is None or params_key(alt) == key:
            return trial, params
        self._skip(trial, key, "model-fraction: launched at the model's fraction for this cell")
        self.moved += 1
        return self._ask_fixed(alt)

    def _cell(self, params: Params) -> str:
        return json.dumps({k: v for k, v in params.items() if k not in self.real}, sort_keys=True, default=str)

    def scores(self, running: Collection[str]) -> tuple[list[Params], np.ndarray] | None:
        """The model's score for every listed point (as ``ModelProposer._model_pick`` ranks them), or None."""
        listed = self._listed()
        told = list(self.measured.values())
        valued = [i for i, t in enumerate(told) if t.failure is None and math.isfinite(t.values[0])]
        if listed is None or len(valued) < 2:
            return None
        points, enc, grid = listed
        x = enc.encode([json.loads(k) for k in self.measured])
        failed = [i for i, t in enumerate(told) if t.failure not in (None, FailureKind.INVALID_CONFIG)]
        y, _ = targets(np.array([told[i].values[0] for i in valued], dtype=float), self.spec, len(failed))
        valued = valued + failed
        gp = self._gp(x[valued], y, enc.groups, self._np_rng, self._hyper)
        self._hyper = gp.hyper
        if running:
            xr = enc.encode([json.loads(k) for k in running])
            xs = np.vstack([x[valued], xr])
            gp = self._gp(xs, np.concatenate([y, gp.predict(xr)[0]]), enc.groups, self._np_rng, gp.hyper)
        mu, sd = gp.predict(grid)
        ok = [i for i in valued if told[i].feasible]
        chance = self._feasible_chance(x, np.array([t.feasible for t in told], dtype=float), enc, grid)
        if ok:
            best_mu = gp.predict(x[ok])[0]
            margin = math.sqrt(gp.noise_var)
            return points, chance * expected_improvement(mu, np.maximum(sd, 1e-9), float(np.max(best_mu)) + margin)
        return points, chance * (mu + 2.0 * sd - float(np.min(mu)))

    def _cell_pick(self, params: Params, running: Collection[str]) -> Params | None:
        scored = self.scores(running)
        if scored is None:
            return None
        points, scores = scored
        cell = self._cell(params)
        same = [i for i, p in enumerate(points) if self._cell(p) == cell]
        for i in sorted(same, key=lambda i: -scores[i]):
            cand = self._repaired(points[i])
            if params_key(cand) == params_key(params) or self.rules.set_aside(cand, running) is None:
                return cand
        return None
