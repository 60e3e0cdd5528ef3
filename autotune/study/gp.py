"""A small Gaussian-process model of noisy measurements over encoded points, in numpy: what the model proposer
(``autotune.study.model_proposer``) predicts for every point it could launch, with its uncertainty.

The kernel is a Matern 5/2 over a weighted distance with one length scale per group of features (one group per search
parameter); the length scales, the signal and the noise variance are the maximum a-posteriori values under weak
log-normal priors, found by a seeded random search around the last fit (a few dozen Cholesky factorisations of a
matrix as large as the measurements: milliseconds for a study's tens of launches).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOG_SCALE_PRIOR = (0.0, 1.5)  # log length scale ~ N(mean, sd): a parameter's whole range is one length scale a priori
LOG_NOISE_PRIOR = (math.log(0.05), 2.0)  # noise variance, on standardised values
LOG_SIGNAL_PRIOR = (0.0, 1.0)
FIT_TRIES = 48


@dataclass(frozen=True)
class Hyper:
    """Log length scale per group, log signal variance, log noise variance."""

    scales: np.ndarray
    signal: float
    noise: float


def group_distances(a: np.ndarray, b: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Squared distance per group between every row of ``a`` and of ``b``: shape (groups, len(a), len(b))."""
    out = np.empty((len(groups), len(a), len(b)))
    for g, cols in enumerate(groups):
        d = a[:, None, cols] - b[None, :, cols]
        out[g] = np.einsum("ijk,ijk->ij", d, d)
    return out


def matern52(sq: np.ndarray, scales: np.ndarray, signal: float) -> np.ndarray:
    """The kernel from per-group squared distances and log length scales."""
    r = np.sqrt(np.maximum(np.tensordot(np.exp(-2.0 * scales), sq, axes=1), 0.0)) * math.sqrt(5.0)
    return float(np.exp(signal)) * (1.0 + r + r * r / 3.0) * np.exp(-r)


class GaussianProcess:
    """Fitted to standardised values ``y`` at encoded points ``x``; ``predict`` gives the mean and standard deviation
    on the original scale."""

    def __init__(
        self,
        x: np.ndarray,
        y: np.ndarray,
        groups: list[np.ndarray],
        rng: np.random.Generator,
        start: Hyper | None = None,
        prior_mean: float | None = None,
    ) -> None:
        """``prior_mean``: what the model expects far from every point (default: the mean of ``y``)."""
        self.x, self.groups = x, groups
        self.mean = float(np.mean(y)) if prior_mean is None else prior_mean
        self.sd = float(np.std(y)) or 1.0
        self.y = (y - self.mean) / self.sd
        sq = group_distances(x, x, groups)
        self.hyper = self._fit(sq, rng, start)
        k = self.kernel(sq, self.hyper)
        k += (math.exp(self.hyper.noise) + 1e-8) * np.eye(len(self.y))
        self.chol = np.linalg.cholesky(k)
        self.alpha = np.linalg.solve(self.chol.T, np.linalg.solve(self.chol, self.y))

    def kernel(self, sq: np.ndarray, h: Hyper) -> np.ndarray:
        """The covariance from per-group squared distances."""
        return matern52(sq, h.scales, h.signal)

    def _log_prior(self, h: Hyper) -> float:
        def lp(x: np.ndarray | float, prior: tuple[float, float]) -> float:
            return float(-0.5 * np.sum(((np.asarray(x) - prior[0]) / prior[1]) ** 2))

        return lp(h.scales, LOG_SCALE_PRIOR) + lp(h.noise, LOG_NOISE_PRIOR) + lp(h.signal, LOG_SIGNAL_PRIOR)

    def _fresh(self, rng: np.random.Generator) -> Hyper:
        """Hyperparameters drawn from their priors."""
        return Hyper(
            rng.normal(*LOG_SCALE_PRIOR, len(self.groups)),
            float(rng.normal(*LOG_SIGNAL_PRIOR)),
            float(rng.normal(*LOG_NOISE_PRIOR)),
        )

    def _step(self, h: Hyper, rng: np.random.Generator) -> Hyper:
        """Hyperparameters a random step from ``h``."""
        return Hyper(
            h.scales + rng.normal(0.0, 0.4, len(self.groups)),
            h.signal + float(rng.normal(0.0, 0.3)),
            h.noise + float(rng.normal(0.0, 0.5)),
        )

    def _log_marginal(self, sq: np.ndarray, h: Hyper) -> float:
        k = self.kernel(sq, h) + (math.exp(h.noise) + 1e-8) * np.eye(len(self.y))
        try:
            chol = np.linalg.cholesky(k)
        except np.linalg.LinAlgError:
            return -math.inf
        alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, self.y))
        return float(-0.5 * self.y @ alpha - np.sum(np.log(np.diag(chol))))

    def _fit(self, sq: np.ndarray, rng: np.random.Generator, start: Hyper | None) -> Hyper:
        best = start or Hyper(np.zeros(len(self.groups)), 0.0, LOG_NOISE_PRIOR[0])
        best_score = self._log_marginal(sq, best) + self._log_prior(best)
        for i in range(FIT_TRIES):
            cand = self._fresh(rng) if i % 3 == 0 else self._step(best, rng)  # a draw from the priors, or a step
            score = self._log_marginal(sq, cand) + self._log_prior(cand)
            if score > best_score:
                best, best_score = cand, score
        return best

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and standard deviation of the noise-free value at every row of ``x``."""
        ks = self.kernel(group_distances(x, self.x, self.groups), self.hyper)
        mu = ks @ self.alpha
        v = np.linalg.solve(self.chol, ks.T)
        var = np.maximum(math.exp(self.hyper.signal) - np.einsum("ij,ij->j", v, v), 1e-12)
        return mu * self.sd + self.mean, np.sqrt(var) * self.sd

    @property
    def noise_var(self) -> float:
        """The fitted measurement noise variance, on the original scale."""
        return math.exp(self.hyper.noise) * self.sd * self.sd


def normal_cdf(z: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1.0 + np.vectorize(math.erf)(z / math.sqrt(2.0))), dtype=float)


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement over ``best`` of a value to maximise."""
    z = (mu - best) / sd
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (mu - best) * normal_cdf(z) + sd * pdf
