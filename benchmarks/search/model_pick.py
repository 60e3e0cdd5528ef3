"""Round 9 of issue #29: the export picked by a model of the measurements, not by the single best launch.

Under noise, the launch with the highest measured value is often a lucky draw of a lesser point, and a launch within
2% of the optimum is recognised only once one noisy measurement makes it the best. ``ModelPick`` ranks the study's
measured-feasible launches by what the searcher's own model (``autotune.study.gp``, fitted as the model proposer fits
it: the first objective's logarithm, a failed launch at the worst value measured) estimates their values to be, so a
point's neighbours and repeats inform its estimate. Only measured-feasible launches are ranked: an export is always a
config that was launched and met every constraint.

``PickLab`` is the benchmark's ``Lab`` with that ranking as the export rule, before and in the finalist stage (the
finalists are the top of the ranking). The launches do not depend on the export rule, so a run's launches are replayed
through it (``replay``) rather than searched again: the same measurements, draw for draw.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from autotune.core.failures import FailureKind
from autotune.export.best import objective_value
from autotune.space import StudySpec
from autotune.space.enumerate import finite_points
from autotune.study.gp import GaussianProcess, Hyper
from autotune.study.model_proposer import LIST_LIMIT, Encoder
from autotune.trial.records import TrialOutcome, TrialRecord
from benchmarks.search.drivers import Lab, Run
from benchmarks.search.landscape import Landscape


class ModelPick:
    """Ranks measured-feasible records by the model's estimate of their first objective (module docstring)."""

    def __init__(self, spec: StudySpec, seed: int) -> None:
        self.spec = spec
        points = finite_points(spec, LIST_LIMIT)
        self.encoder = Encoder(spec, points) if points else None
        self.rng = np.random.default_rng(seed)
        self.hyper: Hyper | None = None
        self.sign = 1.0 if spec.objectives[0].direction == "maximize" else -1.0

    def ranked(self, records: Sequence[TrialRecord]) -> list[TrialRecord]:
        """The complete, feasible records with a value, best estimate first (ties: lower number first); by measured
        value where the model cannot be fitted."""
        obj = self.spec.objectives[0]
        ok = [r for r in records if r.outcome is TrialOutcome.COMPLETE and r.feasible and self._value(r) is not None]
        by_measure = sorted(ok, key=lambda r: (-self.sign * float(self._value(r) or 0.0), r.number))
        valued = [r for r in records if r.outcome is TrialOutcome.COMPLETE and self._value(r) is not None]
        failed = [r for r in records if r.outcome is TrialOutcome.FAILED and r.failure != FailureKind.INVALID_CONFIG]
        if self.encoder is None or len(valued) < 2 or not ok or obj.key is None:
            return by_measure
        raw = np.array([float(self._value(r) or 0.0) for r in valued])
        y = self.sign * (np.log(raw) if np.all(raw > 0) else raw)
        y = np.concatenate([y, np.full(len(failed), float(np.min(y)))])
        x = self.encoder.encode([dict(r.params) for r in valued + failed])
        try:
            gp = GaussianProcess(x, y, self.encoder.groups, self.rng, self.hyper)
        except np.linalg.LinAlgError:
            return by_measure
        self.hyper = gp.hyper
        mu = gp.predict(self.encoder.encode([dict(r.params) for r in ok]))[0]
        order = sorted(range(len(ok)), key=lambda i: (-float(mu[i]), ok[i].number))
        return [ok[i] for i in order]

    def _value(self, rec: TrialRecord) -> float | None:
        v = objective_value(rec, self.spec.objectives[0])
        return v if v is not None and math.isfinite(v) else None


class PickLab(Lab):
    """The benchmark's ``Lab`` with the model's ranking as the export rule."""

    def __init__(self, land: Landscape, noise: float, seed: int, optimum: float) -> None:
        super().__init__(land, noise, seed, optimum)
        self.pick = ModelPick(land.spec, seed)

    def exported(self) -> TrialRecord | None:
        ranked = self.pick.ranked(self.records)
        return ranked[0] if ranked else None

    def finalist_numbers(self, count: int) -> tuple[int, ...]:
        return tuple(r.number for r in self.pick.ranked(self.records)[:count])


def replay(base: dict[str, Any], land: Landscape, optimum: float, method: str, finalists: tuple[int, int]) -> Run:
    """The run ``base`` (a ``Run`` as JSON, with its launched points) with the model's export rule: its launches
    measured again with the same noise draws, judged by ``PickLab``."""
    lab = PickLab(land, base["noise"], base["seed"], optimum)
    for n, params in enumerate(base["launched"]):
        lab.record(n, f"t{n}", json.loads(json.dumps(params)))
    lab.invalid = base["invalid"]
    return lab.run(method, base["seed"], base["suggested"], finalists)
