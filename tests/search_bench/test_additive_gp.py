"""The additive candidate model of round 8 (``benchmarks.search.additive_gp``)."""

from __future__ import annotations

import numpy as np

from autotune.study.gp import Hyper, group_distances
from benchmarks.search.additive_gp import AdditiveGP, MixHyper

GROUPS = [np.array([0]), np.array([1])]


class Fixed(AdditiveGP):
    """The additive model at given hyperparameters (no fit)."""

    def _fit(self, sq: np.ndarray, rng: np.random.Generator, start: Hyper | None) -> Hyper:
        assert start is not None
        return start


def test_additive_part_adds_effects_measured_apart() -> None:
    """Each parameter's effect measured with the other at 0: at the point where both are 1, the additive part predicts
    the sum of both effects, where the product kernel (the searcher's) is unsure and falls back to the mean."""
    t = [0.0, 0.25, 0.5, 0.75, 1.0]
    x = np.array([[a, 0.0] for a in t] + [[0.0, a] for a in t[1:]])
    y = 2.0 * x[:, 0] + 2.0 * x[:, 1]
    both = np.array([[1.0, 1.0]])
    rng = np.random.default_rng(0)
    at = lambda mix: Fixed(x, y, GROUPS, rng, MixHyper(np.zeros(2), 1.0, -6.0, mix)).predict(both)  # noqa: E731
    (add_mu,), (add_sd,) = at(8.0)  # all additive
    (prod_mu,), (prod_sd,) = at(-8.0)  # all product
    assert abs(add_mu - 4.0) < 0.3 < abs(prod_mu - 4.0)
    assert add_sd < prod_sd


def test_additive_kernel_is_a_covariance() -> None:
    """Its prior variance is the signal, as the searcher's (``predict`` relies on it), and it is positive definite."""
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(12, 2))
    gp = AdditiveGP(x, x[:, 0] - x[:, 1], GROUPS, rng)
    k = gp.kernel(group_distances(x, x, GROUPS), gp.hyper)
    assert np.allclose(np.diag(k), np.exp(gp.hyper.signal))
    assert np.linalg.eigvalsh(k).min() > -1e-9
