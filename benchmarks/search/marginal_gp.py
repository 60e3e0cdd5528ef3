"""Round 19's candidate model (issue #29): the searcher's Gaussian process with its hyperparameters integrated out.

The searcher's model (``autotune.study.gp``) predicts with the single most probable set of length scales, signal and
noise. With 5-40 launches those are poorly determined: a length scale twice as long fits almost as well and predicts
very differently away from the launches. ``MarginalGP`` keeps that uncertainty: after the same fit it runs a short
Metropolis chain over the hyperparameters from the fitted ones (the fit's own random step as the proposal, the same
priors) and keeps ``SAMPLES`` of its states; a prediction is the mixture of the samples' predictions, moment-matched to
one mean and standard deviation, and the noise is the samples' mean. Nothing is tuned to a landscape: the chain's
length and spacing are the smallest that give the samples a few accepted steps between them.
"""

from __future__ import annotations

import math

import numpy as np

from autotune.study.gp import GaussianProcess, Hyper, group_distances

SAMPLES = 8  # hyperparameter samples kept
THIN = 5  # chain steps between two kept samples


class MarginalGP(GaussianProcess):
    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        groups: list[np.ndarray],
        rng: np.random.Generator,
        start: Hyper | None = None,
        prior_mean: float | None = None,
    ) -> None:
        super().__init__(x, y, groups, rng, start, prior_mean)
        sq = group_distances(x, x, groups)
        h, score = self.hyper, self._log_marginal(sq, self.hyper) + self._log_prior(self.hyper)
        self.samples: list[tuple[Hyper, np.ndarray, np.ndarray]] = []
        for step in range(1, SAMPLES * THIN + 1):
            cand = self._step(h, rng)
            cand_score = self._log_marginal(sq, cand) + self._log_prior(cand)
            if math.log(rng.uniform()) < cand_score - score:
                h, score = cand, cand_score
            if step % THIN == 0:
                k = self.kernel(sq, h) + (math.exp(h.noise) + 1e-8) * np.eye(len(self.y))
                chol = np.linalg.cholesky(k)
                self.samples.append((h, chol, np.linalg.solve(chol.T, np.linalg.solve(chol, self.y))))

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mixture of the samples' posteriors: its mean and standard deviation (noise-free value)."""
        sq = group_distances(x, self.x, self.groups)
        means, second = np.zeros(len(x)), np.zeros(len(x))
        for h, chol, alpha in self.samples:
            ks = self.kernel(sq, h)
            mu = ks @ alpha
            v = np.linalg.solve(chol, ks.T)
            var = np.maximum(math.exp(h.signal) - np.einsum("ij,ij->j", v, v), 1e-12)
            means += mu
            second += var + mu * mu
        n = len(self.samples)
        mu = means / n
        var = np.maximum(second / n - mu * mu, 1e-12)
        return mu * self.sd + self.mean, np.sqrt(var) * self.sd

    @property
    def noise_var(self) -> float:
        return float(np.mean([math.exp(h.noise) for h, _, _ in self.samples])) * self.sd * self.sd
