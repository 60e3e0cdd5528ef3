"""The model's estimate of each measured-feasible launch, for the export (decision 0016).

Under measurement noise, the launch with the highest measured value is often a lucky draw of a lesser config, and a
config near the optimum counts as the best only once one noisy launch of it happens to be high. ``estimates`` fits
the searcher's model of the measurements (``autotune.study.gp``, as the model proposer fits it: the first objective's
logarithm when every value is positive, a failed launch at the worst value measured) and gives, for every complete,
feasible launch, what the model estimates its first objective to be. A config's neighbours and repeats inform its
estimate, so one lucky draw weighs less. The export then picks the launch with the best estimate where no finalist
stage decided (``autotune.export.best.select_best``); an export is still a config that was launched and met every
constraint.

No estimates (an empty mapping) where the model cannot be fitted: fewer than two measured launches, a space too large
to list (``LIST_LIMIT``), or a fit that fails; the export then ranks by the measured values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property

import numpy as np

from autotune.core.failures import FailureKind
from autotune.export.best import objective_value
from autotune.space import StudySpec
from autotune.space.enumerate import finite_points
from autotune.study.gp import GaussianProcess
from autotune.study.model_proposer import LIST_LIMIT, Encoder, targets
from autotune.trial.records import TrialOutcome, TrialRecord


class ModelRank:
    """Fits the model to a study's records and estimates its measured-feasible launches (module docstring). Each fit
    starts afresh from the same seed, so the same records always get the same estimates; an instance only keeps the
    space's listing between calls."""

    def __init__(self, spec: StudySpec, seed: int = 0) -> None:
        self.spec = spec
        self.seed = seed

    def estimates(self, records: Sequence[TrialRecord]) -> dict[int, float]:
        """Trial number -> the model's estimate of the first objective (in its own units) for every complete,
        feasible record with a value; empty where the model cannot be fitted."""
        obj = self.spec.objectives[0]
        measured = [
            (r, v) for r in records if r.outcome is TrialOutcome.COMPLETE and (v := objective_value(r, obj)) is not None
        ]
        ok = [r for r, _ in measured if r.feasible]
        failed = [r for r in records if r.outcome is TrialOutcome.FAILED and r.failure != FailureKind.INVALID_CONFIG]
        encoder = self._encoder
        if encoder is None or len(measured) < 2 or not ok:
            return {}
        y, log = targets(np.array([v for _, v in measured]), self.spec, len(failed))
        x = encoder.encode([dict(r.params) for r, _ in measured] + [dict(r.params) for r in failed])
        try:
            gp = GaussianProcess(x, y, encoder.groups, np.random.default_rng(self.seed))
        except (np.linalg.LinAlgError, ValueError, FloatingPointError):  # a fit that fails: the measured order
            return {}
        sign = 1.0 if obj.direction == "maximize" else -1.0
        mu = sign * gp.predict(encoder.encode([dict(r.params) for r in ok]))[0]
        values = np.exp(mu) if log else mu
        return {r.number: float(v) for r, v in zip(ok, values, strict=True) if math.isfinite(float(v))}

    @cached_property
    def _encoder(self) -> Encoder | None:
        """The space's encoding, from its listing (None: too large to list)."""
        points = finite_points(self.spec, LIST_LIMIT)
        return Encoder(self.spec, points) if points else None
