"""Landscape families the searcher's rules were not written for: synthetic objectives over the study files' spaces.

``landscape.py`` evaluates a point with the simulator's performance model, the same model the searcher's rules were
designed against (the chain speed model, the KV-cache need, the capacity a running cap gives). A family here draws a
landscape from structure those rules do not encode, each landscape from its own seed (``Family.draw``):

- ``spec-nonmonotone``: speculative speed-up a random, non-monotone function of the step count (per drafter);
- ``spec-step-cost``: chain acceptance, but each further draft step costs a different amount (jumps, not 1 + c k);
- ``memory-shapes``: the KV cache the launch allocates off the prediction by -60%..+10%, throughput a power of the
  share of the top load the cache holds, a slope in the memory fraction beyond that, failure edges moved;
- ``capacity``: a per-token latency bound (TPOT/ITL, or a TTFT bound from queueing) that a large batch breaks, so the
  best point caps its batch below the top load, by a different amount per landscape;
- ``interactions``: small main effects, strong pairwise effects between parameters (NCCL algorithm x protocol x
  channels);
- ``needle``: a flat landscape (within 2%) with one discrete cell 10-15% above it;
- ``plateau``: values quantised to 4% steps, so many points tie and the optimum is a small top step;
- ``infeasible-small`` / ``infeasible-large``: SLO-breaking regions (conjunctions of one or two parameter values)
  covering 15-35% / 50-65% of the launchable points (drawn for 10% / 50%; a single region can cover more).

Every family keeps what SGLang itself decides: a point its validity rules reject is INVALID (no launch). The running
cap still queues the load above it (throughput and TTFT), and a point the study's memory arithmetic (``autotune.policy.fit``
on the sim profile) says cannot hold its weights fails out of memory at load. All values are **synthetic**; they say
nothing about SGLang's speed, only about how a searcher spends launches.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.core.errors import SpaceError
from autotune.engines import sglang_rules
from autotune.engines.sglang_model import SGLANG
from autotune.policy import fit
from autotune.space import StudySpec, to_trial_config
from autotune.trial.records import FailureKind
from autotune.trial.score import objective_key
from benchmarks.search.landscape import Optimum, Outcome, enumerate_points

MEM_FLAG = "mem-fraction-static"
FAMILIES = (
    "spec-nonmonotone",
    "spec-step-cost",
    "memory-shapes",
    "capacity",
    "interactions",
    "needle",
    "plateau",
    "infeasible-small",
    "infeasible-large",
)
SPEC_FAMILIES = {"spec-nonmonotone", "spec-step-cost"}
# Families looked at while designing any change to the searcher (issue #29); every other family judges it.
DESIGN_FAMILIES = ("interactions", "plateau")
SPACES = ("speculative", "h200-tp1-speculative", "nccl", "h200x2-tp2-nccl", "smoke")
FAMILY_VERSION = 2  # bump when a change here changes any value


@dataclass(frozen=True)
class Variant:
    """What ``drivers.Lab`` reads of a landscape's variant: its name (``family#instance``)."""

    name: str


def _u(rng: random.Random, lo: float, hi: float) -> float:
    return rng.uniform(lo, hi)


class FamilyLandscape:
    """One landscape of a family over a study's space: ``evaluate(params)`` answers what a trial would record."""

    def __init__(self, spec: StudySpec, family: str, instance: int) -> None:
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}; use one of {', '.join(FAMILIES)}")
        self.spec = spec
        self.family = family
        self.instance = instance
        self.variant = Variant(f"{family}#{instance}")
        self.top = max(spec.plan.concurrencies)
        self.objective_key = objective_key(spec.objectives[0].metric, spec.objectives[0].level)
        self.tokens = spec.workload.input_len + spec.workload.output_len
        seed = int(hashlib.sha256(f"{spec.name}/{family}/{instance}".encode()).hexdigest()[:12], 16)
        self.rng = random.Random(seed)
        from autotune.policy.prescreen import study_sizes

        self.sizes = study_sizes(spec)
        self._cache: dict[str, Outcome] = {}
        self._draw()

    @property
    def name(self) -> str:
        return f"{self.spec.name}/{self.variant.name}"

    # ------------------------------------------------------------------ drawing
    def _draw(self) -> None:
        rng, fam = self.rng, self.family
        self.main_sigma = {"interactions": 0.02, "needle": 0.006, "plateau": 0.05}.get(fam, 0.04)
        self.pair_sigma = 0.10 if fam == "interactions" else 0.0
        names = [p.name for p in self.spec.params if p.flag != MEM_FLAG]
        self.pairs = []
        if self.pair_sigma and len(names) >= 2:
            pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
            self.pairs = rng.sample(pairs, min(len(pairs), rng.randint(2, 4)))
        self._effects: dict[str, float] = {}
        self.base = _u(rng, 1000.0, 5000.0)
        # speculation
        self.spec_gain = math.exp(rng.gauss(0.0, 0.2))
        self.drafter_accept: dict[str, float] = {}
        drafters = [str(c) for p in self.spec.params if p.flag == sglang_rules.DRAFT_MODEL for c in p.choices]
        for i, d in enumerate(drafters):
            broken = i > 0 and rng.random() < 0.5  # a custom drafter that accepts nothing, sometimes
            self.drafter_accept[d] = 0.0 if broken else _u(rng, 0.45, 0.85)
        self.step_cost = _u(rng, 0.08, 0.3)
        self.step_costs = [self.step_cost * math.exp(rng.gauss(0.0, 0.8)) for _ in range(10)]  # spec-step-cost
        self.step_noise = [math.exp(rng.gauss(0.0, 0.2)) for _ in range(10)]  # spec-nonmonotone, per step count
        self.tree_cost = _u(rng, 0.02, 0.1)
        # capacity: throughput over the running batch, per-token latency rising with it
        self.batch_power = _u(rng, 0.5, 1.0)
        self.cap_knee = rng.choice([0.25, 0.5, 0.75]) if fam == "capacity" else 2.0  # share of top load feasible
        # memory
        memory = fam == "memory-shapes"
        self.kv_err = _u(rng, 0.4, 1.1) if memory else _u(rng, 0.95, 1.05)
        self.kv_power = _u(rng, 0.3, 1.5) if memory else 1.0
        self.mem_slope = _u(rng, -1.5, 1.5) if memory else 0.0
        self.mem_edge = _u(rng, -0.05, 0.03) if memory else 0.0  # capture fails this much sooner (-) or later (+)
        # SLO headroom of a point (constraint metric / bound)
        self.slack = _u(rng, 0.4, 0.8)
        # infeasible regions: conjunctions of one or two parameter values
        self.regions: list[tuple[tuple[str, str], ...]] = []
        if fam.startswith("infeasible"):
            target = 0.1 if fam == "infeasible-small" else 0.5
            self.regions = self._regions(target)
        self.needle: str | None = None
        if fam == "needle":
            cells = sorted({self._cell(p) for p in self._launchable()})
            self.needle = rng.choice(cells) if cells else None
            self.needle_gain = _u(rng, 1.10, 1.15)

    def _launchable(self) -> list[dict[str, Any]]:
        return [p for p in enumerate_points(self.spec, float_points=4) if self._valid(p)]

    def _regions(self, target: float) -> list[tuple[tuple[str, str], ...]]:
        points = self._launchable()
        values: dict[str, set[str]] = {}
        for p in points:
            for k, v in p.items():
                values.setdefault(k, set()).add(repr(v))
        regions: list[tuple[tuple[str, str], ...]] = []
        covered = 0.0
        for _ in range(50):
            if covered >= target or not values:
                break
            k = self.rng.sample(sorted(values), min(len(values), self.rng.choice([1, 2])))
            region = tuple((name, self.rng.choice(sorted(values[name]))) for name in k)
            regions.append(region)
            inside = sum(any(self._in(p, r) for r in regions) for p in points)
            covered = inside / max(len(points), 1)
            if covered > target + 0.15 and len(regions) > 1:
                regions.pop()
                inside = sum(any(self._in(p, r) for r in regions) for p in points)
                covered = inside / max(len(points), 1)
        return regions

    @staticmethod
    def _in(p: Mapping[str, Any], region: tuple[tuple[str, str], ...]) -> bool:
        return all(name in p and repr(p[name]) == v for name, v in region)

    def _cell(self, p: Mapping[str, Any]) -> str:
        return repr(sorted((k, repr(v)) for k, v in p.items() if k != self._mem_param()))

    def _mem_param(self) -> str | None:
        return next((q.name for q in self.spec.params if q.flag == MEM_FLAG), None)

    def _valid(self, p: Mapping[str, Any]) -> bool:
        try:
            tc = to_trial_config(self.spec, dict(p))
        except SpaceError:
            return False
        return not sglang_rules.violations(tc.flags, tc.env, tp_size=tc.tp_size)

    def _effect(self, key: str, sigma: float) -> float:
        if key not in self._effects:
            h = int(hashlib.sha256(f"{self.name}/{key}".encode()).hexdigest()[:12], 16)
            self._effects[key] = random.Random(h).gauss(0.0, sigma)
        return self._effects[key]

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, params: Mapping[str, Any]) -> Outcome:
        key = repr(sorted((k, repr(v)) for k, v in params.items()))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._evaluate(params)
        return hit

    def _evaluate(self, params: Mapping[str, Any]) -> Outcome:
        tc = to_trial_config(self.spec, dict(params))
        flags, env = tc.flags, dict(tc.env)
        problems = sglang_rules.violations(flags, env, tp_size=tc.tp_size)
        if problems:
            return Outcome("invalid", FailureKind.INVALID_CONFIG, 0.0, {}, False, problems[0])
        frac = flags.get(MEM_FLAG)
        kv_tokens: int | None = None
        if self.sizes is not None:
            pred = fit.predict(self.sizes, flags, tp_size=tc.tp_size, model=SGLANG)
            if pred.kv_tokens is not None and pred.kv_tokens <= 0 or (pred.failure is FailureKind.OOM_AT_LAUNCH):
                return Outcome("failed", FailureKind.OOM_AT_LAUNCH, 0.0, {}, False, "no memory left for the KV cache")
            if isinstance(frac, float) and self.mem_edge:
                moved = fit.predict(
                    self.sizes, {**flags, MEM_FLAG: min(frac - self.mem_edge, 0.99)}, tp_size=tc.tp_size, model=SGLANG
                )
                failure = moved.failure
            else:
                failure = pred.failure
            if failure is FailureKind.GRAPH_CAPTURE_FAILED:
                return Outcome("failed", failure, 0.0, {}, False, "CUDA graph capture ran out of memory")
            if pred.kv_tokens is not None:
                kv_tokens = max(int(pred.kv_tokens * self.kv_err), 1)
        cap = sglang_rules.effective_max_running_requests(flags)
        running = min(self.top, cap) if cap is not None else self.top
        if kv_tokens is not None:
            running = max(min(running, kv_tokens // max(self.tokens, 1)), 1)
        share = running / self.top
        value = self.base * share**self.batch_power
        if kv_tokens is not None:
            need = running * self.tokens
            value *= min(kv_tokens / need, 1.0) ** self.kv_power if need else 1.0
        if isinstance(frac, float) and self.mem_slope:
            value *= max(1.0 + self.mem_slope * (frac - 0.85), 0.3)
        speedup, accept = self._speculation(flags)
        value *= speedup
        cell = self._cell(params)
        for k, v in params.items():
            if k != self._mem_param():
                value *= math.exp(self._effect(f"{k}={v!r}", self.main_sigma))
        for a, b in self.pairs:
            if a in params and b in params:
                value *= math.exp(self._effect(f"{a}={params[a]!r}&{b}={params[b]!r}", self.pair_sigma))
        if self.needle is not None and cell == self.needle:
            value *= self.needle_gain
        if self.family == "plateau":
            step = self.base * 0.04
            value = math.floor(value / step) * step
        metrics, feasible = self._slo(params, share, running)
        return Outcome("complete", None, value, metrics, feasible, accept_length=accept, kv_tokens=kv_tokens)

    def _speculation(self, flags: Mapping[str, Any]) -> tuple[float, float | None]:
        algo = sglang_rules.algorithm(flags)
        if algo is None:
            return 1.0, None
        a = self.drafter_accept.get(str(flags.get(sglang_rules.DRAFT_MODEL)), 0.6)
        steps = int(flags.get(sglang_rules.STEPS) or 3)
        topk = int(flags.get(sglang_rules.TOPK) or 1)
        if topk > 1:
            a_tree = 1 - (1 - a) ** topk
            tokens = int(flags.get(sglang_rules.DRAFT_TOKENS) or steps + 1)
            accept = min(sum(a_tree**i for i in range(steps + 1)), tokens + 1.0)
            cost = 1 + self.step_cost * steps + self.tree_cost * tokens
        else:
            accept = sum(a**i for i in range(steps + 1))
            cost = 1 + (sum(self.step_costs[:steps]) if self.family == "spec-step-cost" else self.step_cost * steps)
        speed = accept / cost * self.spec_gain
        if self.family == "spec-nonmonotone":
            speed *= self.step_noise[min(steps, 9)] * (1 if topk == 1 else self.step_noise[(steps + topk) % 10])
        return speed, accept

    def _slo(self, params: Mapping[str, Any], share: float, running: int) -> tuple[dict[str, float], bool]:
        metrics: dict[str, float] = {}
        feasible = True
        inside = any(self._in(params, r) for r in self.regions)
        per_token = any(not c.metric.startswith("ttft") for c in self.spec.constraints)
        for c in self.spec.constraints:
            k = objective_key(c.metric, c.level)
            if c.max is None:
                continue
            u = self.slack * math.exp(self._effect(f"slo/{k}/{self._cell(params)}", 0.1))
            if c.metric.startswith("ttft"):
                u *= 1.0 / max(share, 1e-3) ** 0.7  # queueing behind the cap
            if (not c.metric.startswith("ttft") or not per_token) and share > self.cap_knee:
                # per-token latency (or, where only TTFT is bounded, prefill behind a large batch) that a large
                # batch breaks: the capacity family
                u *= 1.0 + 1.5 * (share - self.cap_knee) / max(self.cap_knee, 1e-3)
            if inside:  # an SLO-breaking region: at least 20% over the bound
                u = max(2.0 * u, 1.2)
            metrics[k] = c.max * u
            feasible = feasible and u <= 1.0
        return metrics, feasible


def family_optimum(land: FamilyLandscape) -> Optimum:
    """The best true value over every point of the space (floats every 0.01)."""
    best, arg, n, feasible = 0.0, {}, 0, 0
    for point in enumerate_points(land.spec):
        n += 1
        o = land.evaluate(point)
        feasible += o.feasible
        if o.true_value > best:
            best, arg = o.true_value, point
    return Optimum(best, arg, n, feasible)


def applies(family: str, spec: StudySpec) -> bool:
    """Whether a family says anything over this space (speculation families need speculative parameters, capacity a
    running cap, memory a memory fraction the study searches)."""
    flags = {p.flag for p in spec.params}
    if family in SPEC_FAMILIES:
        return "speculative-algorithm" in flags
    if family == "capacity":
        return sglang_rules.MAX_RUNNING in flags
    if family == "memory-shapes":
        return MEM_FLAG in flags
    return True
