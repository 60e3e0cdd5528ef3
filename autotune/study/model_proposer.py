"""The searcher's proposer: TPE and a Gaussian-process model of the measurements take turns (decision 0015).

It is the study's ``Proposer`` (``autotune.study.proposer``: seed points, TPE's first draws, the repair, the
set-asides, the deferred seeds) with every second proposal, once the study has ``MODEL_AFTER`` measured launches,
taken from a model instead of the sampler. TPE keeps exploring where the model is sure of itself; the model finds a
good point sooner where TPE's densities are slow. Each model proposal:

- models the first objective of the measured launches (its logarithm when every value is positive: speeds multiply)
  with a GP (``autotune.study.gp``) whose length scales say how far each parameter's effect reaches; a failed launch
  counts as the worst value measured (as TPE counts it among its poor points); points running now count as measured
  at their predicted value, so parallel slots do not all get one point;
- estimates each point's chance of a feasible launch with a second GP fitted to the measured points' feasibility; a
  point far from every measured one is a coin flip;
- launches the listed point of the space with the highest expected improvement over the best predicted measured
  feasible value plus the measurement noise the model fitted (one launch cannot show less), times that chance, that
  the repair and the set-asides let through.

The model proposes only for TPE studies with one objective and a space small enough to list (``LIST_LIMIT``);
anything else is the sampler's, as is a turn where the model cannot be fitted to the launches.

Once every point of such a space has been launched (``exhausted``), each launch left in the budget re-measures the
measured feasible point with the highest upper bound: the mean of its own measurements of the first objective (the
model's scale) plus one standard error, the measurement noise the model fits to every launch over the point's count
(``highest_bound``), among those not running now while any is free. A point measured once and low keeps a wide bound
and is measured again before one measured often; TPE's proposals, which the study's own rule relaunches, gather on a
few points (issue #29, rounds 26-27 of ``benchmarks/search/results/families.md``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from typing import Any

import numpy as np
import optuna

from autotune.core.failures import FailureKind
from autotune.policy.base import Params, Rules, params_key
from autotune.space import StudySpec
from autotune.space.enumerate import finite_points
from autotune.space.types import ParamSpec
from autotune.space.values import is_number
from autotune.study.gp import GaussianProcess, Hyper, expected_improvement, normal_cdf
from autotune.study.proposer import Proposer, measured_trials

MODEL_AFTER = 5  # measured launches (failed ones included) before the model proposes
LIST_LIMIT = 200_000  # a space of more points than this is left to the sampler
EVERY = 2  # the model makes one proposal in this many, the sampler the others


def _numeric_scale(values: list[float], log: bool) -> tuple[float, float, bool]:
    lo, hi = min(values), max(values)
    log = log or (lo > 0 and hi / lo >= 8)
    if log:
        lo, hi = math.log(lo), math.log(hi)
    return lo, (hi - lo) or 1.0, log


class Encoder:
    """Points of a space as rows of numbers in [0, 1], one group of columns per parameter: a number (or a categorical
    of numbers) is its place in its range (logarithmic when the parameter is, or spans 8x), with a column saying it is
    set at all where it can be absent or None; other choices are one column each, 1/sqrt(2) when taken, so two
    different choices are as far apart as a whole range."""

    def __init__(self, spec: StudySpec, points: list[Params]) -> None:
        self.columns: list[tuple[str, Any]] = []  # (param, kind)
        self.groups: list[np.ndarray] = []
        self._plan: list[tuple[ParamSpec, str, Any]] = []
        for p in spec.params:
            seen = [pt[p.name] for pt in points if p.name in pt]
            absent = len(seen) < len(points) or any(v is None for v in seen)
            numbers = [float(v) for v in seen if is_number(v)]
            first = len(self.columns)
            if p.type != "bool" and numbers and all(v is None or is_number(v) for v in seen):
                self._plan.append((p, "number", (*_numeric_scale(numbers, p.log), absent)))
                self.columns.append((p.name, "number"))
                if absent:
                    self.columns.append((p.name, "set"))
            elif p.type == "bool":
                self._plan.append((p, "bool", absent))
                self.columns.append((p.name, "bool"))
                if absent:
                    self.columns.append((p.name, "set"))
            else:
                choices = list(dict.fromkeys(repr(v) for v in seen))
                self._plan.append((p, "choice", choices))
                self.columns.extend((p.name, c) for c in choices)
            self.groups.append(np.arange(first, len(self.columns)))

    def encode(self, points: list[Params]) -> np.ndarray:
        out = np.zeros((len(points), len(self.columns)))
        for row, pt in enumerate(points):
            col = 0
            for p, kind, info in self._plan:
                v = pt.get(p.name)
                if kind == "number":
                    lo, span, log, absent = info
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        x = math.log(v) if log and v > 0 else float(v)
                        out[row, col] = (x - lo) / span
                        if absent:
                            out[row, col + 1] = 1.0
                    col += 2 if absent else 1
                elif kind == "bool":
                    out[row, col] = 1.0 if v is True else 0.0
                    if info:
                        out[row, col + 1] = 1.0 if p.name in pt else 0.0
                    col += 2 if info else 1
                else:
                    if p.name in pt and repr(v) in info:
                        out[row, col + info.index(repr(v))] = 1.0 / math.sqrt(2.0)
                    col += len(info)
        return out


def targets(raw: np.ndarray, spec: StudySpec, failed: int) -> tuple[np.ndarray, bool]:
    """What the model fits for measured values ``raw`` of the first objective: their logarithm when every one is
    positive (speeds multiply), signed so that higher is better, then ``failed`` launches at the worst of them; and
    whether the logarithm was taken."""
    sign = 1.0 if spec.objectives[0].direction == "maximize" else -1.0
    log = bool(np.all(raw > 0))
    y = sign * (np.log(raw) if log else raw)
    return np.concatenate([y, np.full(failed, float(np.min(y)))]), log


def highest_bound(values: dict[str, list[float]], noise_var: float) -> str:
    """The key whose mean of ``values`` plus one standard error (``noise_var`` over its count) is highest; the first
    such where several are."""
    keys = list(values)
    bounds = [float(np.mean(values[k])) + math.sqrt(noise_var / len(values[k])) for k in keys]
    return keys[int(np.argmax(bounds))]


class ModelProposer(Proposer):
    """The study's proposer with every second proposal the model's (module docstring)."""

    def __init__(self, spec: StudySpec, study: optuna.Study, rules: Rules) -> None:
        super().__init__(spec, study, rules)
        self.model_proposed = 0
        self._turns = 0
        self._on = spec.sampler == "tpe" and len(spec.objectives) == 1
        self._np_rng = np.random.default_rng(spec.seed)
        self._hyper: Hyper | None = None
        self._feasible_hyper: Hyper | None = None
        self._listing: tuple[list[Params], Encoder, np.ndarray] | None = None
        self._too_large = False  # the space is too large to list (walked once, not again at every proposal)

    def propose(self, running: Collection[str], *, left: int, finishing: bool) -> tuple[optuna.Trial, Params]:
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        deferred_due = self.deferred and (finishing or left <= len(self.deferred))
        if self._on and not waiting and not deferred_due and not self.exhausted and len(self.measured) >= MODEL_AFTER:
            self._turns += 1
            pick = None
            if self._models_turn(self._turns):
                try:
                    pick = self._model_pick(running)
                except np.linalg.LinAlgError:  # a model that cannot be fitted to these launches: the sampler proposes
                    pass
            if pick is not None:
                self.model_proposed += 1
                trial, params = self._ask_fixed(pick)
                trial.set_user_attr("proposed_by", "model")  # the study's trials say which proposals were the model's
                return trial, params
        return super().propose(running, left=left, finishing=finishing)

    def _gp(self, *args: Any) -> GaussianProcess:
        """The model fitted to measurements (``GaussianProcess``'s arguments)."""
        return GaussianProcess(*args)

    def _models_turn(self, turn: int) -> bool:
        """Whether the ``turn``-th proposal since the model started is the model's (one in ``EVERY``)."""
        return turn % EVERY == 1

    def _listed(self) -> tuple[list[Params], Encoder, np.ndarray] | None:
        if self._listing is None and not self._too_large:
            points = finite_points(self.spec, LIST_LIMIT)
            if not points:
                self._too_large = True
                return None
            enc = Encoder(self.spec, points)
            self._listing = (points, enc, enc.encode(points))
        return self._listing

    def _model_pick(self, running: Collection[str]) -> Params | None:
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
        ok = [i for i in valued if told[i].feasible]
        chance = self._feasible_chance(x, np.array([t.feasible for t in told], dtype=float), enc, grid)
        if ok:
            best_mu = gp.predict(x[ok])[0]
            margin = math.sqrt(gp.noise_var)
            scores = chance * expected_improvement(mu, np.maximum(sd, 1e-9), float(np.max(best_mu)) + margin)
        else:  # nothing feasible yet: the most likely feasible of the optimistic points
            scores = chance * (mu + 2.0 * sd - float(np.min(mu)))
        for i in np.argsort(-scores, kind="stable"):
            cand = self._repaired(points[int(i)])
            if self.rules.set_aside(cand, running) is None:
                return cand
        return None

    def _measured_like(self, params: Params, running: Collection[str]) -> Params:
        """The measured point to launch again once the space is exhausted: the feasible one with the highest upper
        bound (module docstring), or the study's own choice where the model does not propose or cannot be fitted."""
        pick = None
        if self._on:
            try:
                pick = self._highest_bound(running)
            except np.linalg.LinAlgError:
                pass
        return pick if pick is not None else super()._measured_like(params, running)

    def _highest_bound(self, running: Collection[str]) -> Params | None:
        listed = self._listed()
        measured: dict[str, list[float]] = {}  # each point's measured first objective, every launch of it
        for p, t in measured_trials(self.study):
            if t.failure is None and t.values and math.isfinite(t.values[0]):
                measured.setdefault(params_key(p), []).append(float(t.values[0]))
        feasible = [k for k in measured if k in self.measured and self.measured[k].feasible]
        if listed is None or len(feasible) < 2:
            return None
        _, enc, _ = listed
        every = [(k, v) for k in measured for v in measured[k]]
        y, _ = targets(np.array([v for _, v in every], dtype=float), self.spec, 0)
        x = enc.encode([json.loads(k) for k, _ in every])
        noise = self._gp(x, y, enc.groups, self._np_rng, self._hyper).noise_var
        scaled: dict[str, list[float]] = {}
        for (k, _), yi in zip(every, y, strict=True):
            scaled.setdefault(k, []).append(float(yi))
        free = [k for k in feasible if k not in running] or feasible  # a running point is not launched beside itself
        return json.loads(highest_bound({k: scaled[k] for k in free}, noise))

    def _feasible_chance(self, x: np.ndarray, feasible: np.ndarray, enc: Encoder, grid: np.ndarray) -> np.ndarray:
        """Each listed point's chance of a feasible launch: a GP fitted to the measured points' feasibility (+1 / -1,
        its own length scales: a memory edge is sharper than the speed's slope), read as a probit; a point far from
        every measured one is a coin flip."""
        if feasible.all() or len(feasible) < 2:
            return np.ones(len(grid))
        gp = self._gp(x, 2.0 * feasible - 1.0, enc.groups, self._np_rng, self._feasible_hyper, 0.0)
        self._feasible_hyper = gp.hyper
        mu, sd = gp.predict(grid)
        return normal_cdf(mu / np.sqrt(sd * sd + gp.noise_var))
