"""Round 10 of issue #29: the sampler's turns taken by a Thompson sample of the model (``gp-ts-alt``).

The searcher (``autotune.study.model_proposer``) alternates TPE and the model's expected improvement. Here the turns
that were TPE's draw one joint sample of the model's posterior over candidate points and launch the sample's best,
among the points a draw of the feasibility model says are feasible. A Thompson sample explores in proportion to the
model's belief that a point is the best: an unmeasured region far from every launch is drawn often while the model
knows little there, and less as launches near it come in. Before the model starts, and where it cannot be fitted,
TPE proposes as in the searcher.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection

import numpy as np

from autotune.core.failures import FailureKind
from autotune.policy.base import Params
from autotune.study.gp import group_distances
from autotune.study.model_proposer import ModelProposer, targets

SAMPLE_POINTS = 1000  # candidates in one joint draw: the PROMISING by mean + 2 sd, the rest at random
PROMISING = 300


class ThompsonTurns(ModelProposer):
    """The searcher's proposer with every proposal the model's: expected improvement and a Thompson sample in turn."""

    def _models_turn(self, turn: int) -> bool:
        return True

    def _model_pick(self, running: Collection[str]) -> Params | None:
        if self._turns % 2 == 1:
            return super()._model_pick(running)
        return self._thompson_pick(running)

    def _thompson_pick(self, running: Collection[str]) -> Params | None:
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
        if running:  # running points count as measured at their predicted value (a kriging believer)
            xr = enc.encode([json.loads(k) for k in running])
            xs = np.vstack([x[valued], xr])
            gp = self._gp(xs, np.concatenate([y, gp.predict(xr)[0]]), enc.groups, self._np_rng, gp.hyper)
        mu, sd = gp.predict(grid)
        if len(grid) > SAMPLE_POINTS:
            top = np.argsort(-(mu + 2.0 * sd), kind="stable")[:PROMISING]
            rest = np.setdiff1d(np.arange(len(grid)), top)
            idx = np.concatenate([top, self._np_rng.choice(rest, SAMPLE_POINTS - len(top), replace=False)])
        else:
            idx = np.arange(len(grid))
        draw = self._joint_draw(gp, grid[idx])
        chance = self._feasible_chance(x, np.array([t.feasible for t in told], dtype=float), enc, grid[idx])
        draw = np.where(self._np_rng.random(len(idx)) < chance, draw, -np.inf)
        for j in np.argsort(-draw, kind="stable"):
            if not math.isfinite(draw[j]):
                break
            cand = self._repaired(points[int(idx[j])])
            if self.rules.set_aside(cand, running) is None:
                return cand
        return None

    def _joint_draw(self, gp: object, xs: np.ndarray) -> np.ndarray:
        """One draw of the noise-free values at the rows of ``xs`` from the model's joint posterior (standardised)."""
        kss = gp.kernel(group_distances(xs, xs, gp.groups), gp.hyper)  # type: ignore[attr-defined]
        ks = gp.kernel(group_distances(xs, gp.x, gp.groups), gp.hyper)  # type: ignore[attr-defined]
        mean = ks @ gp.alpha  # type: ignore[attr-defined]
        v = np.linalg.solve(gp.chol, ks.T)  # type: ignore[attr-defined]
        cov = kss - v.T @ v
        jitter = 1e-6 * float(np.mean(np.diag(kss)))
        chol = np.linalg.cholesky(cov + jitter * np.eye(len(xs)))
        return np.asarray(mean + chol @ self._np_rng.standard_normal(len(xs)))
