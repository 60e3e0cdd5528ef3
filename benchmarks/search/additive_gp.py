"""Round 8's candidate model (issue #29): the searcher's Gaussian process with an additive part in its kernel.

The searcher's kernel (``autotune.study.gp``) is one Matern 5/2 over the weighted distance across every parameter: what
a launch says reaches only points near it in every parameter at once. ``AdditiveGP`` mixes that kernel with the mean
of one Matern 5/2 per parameter (an additive GP): a parameter's effect measured at one setting of the others carries
to every setting of them. The mix is a hyperparameter fitted with the others (a logit, prior N(0, 1.5)), so a
landscape of strong interactions can fall back to the product kernel. Judged in round 8 and not kept
(``results/families.md``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autotune.study.gp import GaussianProcess, Hyper, matern52

MIX_PRIOR = (0.0, 1.5)


@dataclass(frozen=True)
class MixHyper(Hyper):
    """The searcher's hyperparameters and the additive part's share, as a logit."""

    mix: float = 0.0


def _mix(h: Hyper) -> float:
    return h.mix if isinstance(h, MixHyper) else 0.0  # a fit's first guess is a plain ``Hyper``: an even mix


class AdditiveGP(GaussianProcess):
    def kernel(self, sq: np.ndarray, h: Hyper) -> np.ndarray:
        product = matern52(sq, h.scales, 0.0)
        r = np.sqrt(np.maximum(sq, 0.0) * 5.0) * np.exp(-h.scales)[:, None, None]
        additive = np.mean((1.0 + r + r * r / 3.0) * np.exp(-r), axis=0)
        w = 1.0 / (1.0 + math.exp(-_mix(h)))
        return float(np.exp(h.signal)) * (w * additive + (1.0 - w) * product)

    def _log_prior(self, h: Hyper) -> float:
        return super()._log_prior(h) - 0.5 * ((_mix(h) - MIX_PRIOR[0]) / MIX_PRIOR[1]) ** 2

    def _fresh(self, rng: np.random.Generator) -> Hyper:
        h = super()._fresh(rng)
        return MixHyper(h.scales, h.signal, h.noise, float(rng.normal(*MIX_PRIOR)))

    def _step(self, h: Hyper, rng: np.random.Generator) -> Hyper:
        s = super()._step(h, rng)
        return MixHyper(s.scales, s.signal, s.noise, _mix(h) + float(rng.normal(0.0, 0.5)))
