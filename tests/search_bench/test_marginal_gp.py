"""The candidate model of round 19 (``benchmarks.search.marginal_gp``): hyperparameters integrated out."""

from __future__ import annotations

import numpy as np

from autotune.study.gp import GaussianProcess, Hyper
from benchmarks.search.marginal_gp import SAMPLES, MarginalGP

GROUPS = [np.array([0]), np.array([1])]


def _data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=(12, 2))
    return x, np.sin(4.0 * x[:, 0]) + x[:, 1] + rng.normal(0.0, 0.05, 12)


def _stay(self: GaussianProcess, h: Hyper, rng: np.random.Generator) -> Hyper:
    return h


class Still(MarginalGP):
    """A chain that never moves (its fit draws from the priors only): every sample is the fitted hyperparameters."""

    _step = _stay


class PlainStill(GaussianProcess):
    """The searcher's model with the same fit."""

    _step = _stay


def test_a_chain_that_stays_at_the_fit_predicts_as_the_searchers_model() -> None:
    x, y = _data(0)
    grid = np.random.default_rng(9).uniform(size=(30, 2))
    still = Still(x, y, GROUPS, np.random.default_rng(1))
    plain = PlainStill(x, y, GROUPS, np.random.default_rng(1))
    assert np.allclose(still.hyper.scales, plain.hyper.scales) and len(still.samples) == SAMPLES
    for a, b in zip(still.predict(grid), plain.predict(grid), strict=True):
        assert np.allclose(a, b)
    assert np.isclose(still.noise_var, plain.noise_var)


def test_the_mixture_is_the_samples_mean_with_their_disagreement_in_its_spread() -> None:
    """The chain moves; the prediction's mean is the samples' mean, its variance at least their mean variance (the
    spread between samples adds to it)."""
    x, y = _data(2)
    grid = np.random.default_rng(3).uniform(size=(40, 2))
    gp = MarginalGP(x, y, GROUPS, np.random.default_rng(4))
    assert len({(tuple(h.scales), h.noise) for h, _, _ in gp.samples}) > 1
    per = []
    for h, chol, alpha in gp.samples:
        one = GaussianProcess.__new__(GaussianProcess)
        one.__dict__.update(gp.__dict__)
        one.hyper, one.chol, one.alpha = h, chol, alpha
        per.append(GaussianProcess.predict(one, grid))
    mu, sd = gp.predict(grid)
    assert np.allclose(mu, np.mean([m for m, _ in per], axis=0))
    assert np.all(sd**2 >= np.mean([s**2 for _, s in per], axis=0) - 1e-9)
