"""A search landscape: a study's space evaluated by the simulator's performance model, without servers or HTTP.

For a point (the sampled parameters) the landscape answers what a trial would record: INVALID when SGLang's validity
rules reject it (no launch), FAILED when the simulated launch fails (out of memory at load or KV allocation, CUDA-graph
capture, NCCL), else the metrics at the study's top load level from a closed-loop run of the simulated scheduler in
virtual time. Objective and constraints are the study's own (``output_tok_per_s@max``, ``ttft_ms.p99@max``, ...).

A ``Variant`` perturbs the profile's constants (drafter acceptance, all-reduce cost, memory per GPU, per-sequence
cost, the simulated accept length) so the benchmark does not tune the search to one landscape.

The KV-cache size enters the run in 10% buckets (above what the top load can use it does not matter), so points that
differ only in ``mem_fraction_static`` share a run unless the cache limits them; the landscape is still a function of
the point. Values are simulated, never measurements.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.engines import sglang_rules
from autotune.engines.base import flags_to_argv
from autotune.sim.args import parse_args
from autotune.sim.config import ArgsFailure, SimConfig, resolve
from autotune.sim.offline import simulate_closed_loop
from autotune.sim.profile import Profile, load_profile
from autotune.space import StudySpec, to_trial_config
from autotune.space.enumerate import walk_points
from autotune.space.values import rounded
from autotune.trial.records import FailureKind
from autotune.trial.score import objective_key

MEM_FLAG = "mem-fraction-static"
KV_BUCKET = 1.10
LANDSCAPE_VERSION = 1  # bump when a change here changes any value (the optimum cache is keyed on it)
RUNS_VERSION = 2  # bump when a simulated run reports other metrics (the runs cache is keyed on it)
FLOAT_GRID_STEP = 0.01  # a float parameter is enumerated in steps of this (for the optimum and the grid)


class LandscapeError(ValueError):
    """The study cannot be evaluated offline (no sim profile, an unknown constraint metric)."""


@dataclass(frozen=True)
class Variant:
    """Multipliers on a profile's constants and the study's targets; 1.0 leaves a value as the study has it."""

    name: str
    accept_scale: float = 1.0  # each drafter's per-position acceptance (capped at 0.95)
    allreduce_scale: float = 1.0  # cost of a collective: NCCL and custom all-reduce latency up, bandwidth down
    mem_scale: float = 1.0  # memory per GPU
    per_seq_scale: float = 1.0  # GPU time per running sequence per step (attention at large batch)
    accept_len: float | None = None  # replaces SGLANG_SIMULATE_ACC_LEN when the study sets it
    drafter_cost_scale: float = 1.0  # a drafter's GPU time per step (its fitted accept_token_us has no known cause)
    slo_scale: float = 1.0  # every SLO bound (a ``max``) of the study times this: tighter or looser targets
    top_scale: float = 1.0  # the highest load level times this: the load being optimised
    # > 0: a drafter that accepts nothing (the user story's custom drafter) is repaired: it gets the best other
    # drafter's acceptance times this (a drafter trained on the served model's own outputs, once its training data or
    # quantization is fixed, accepts more than one trained for an older model)
    repaired_drafter: float = 0.0

    def affects(self, spec: StudySpec) -> bool:
        """False when the variant changes only drafters and the study searches no speculative decoding (it would be
        the base landscape again)."""
        drafter_only = {"name", "accept_scale", "drafter_cost_scale", "accept_len", "repaired_drafter"}
        changed = {f.name for f in dataclasses.fields(self) if getattr(self, f.name) != f.default} - {"name"}
        if not changed or not changed <= drafter_only:
            return True
        return any(p.flag == "speculative-algorithm" for p in spec.params)

    def key(self) -> str:
        """What identifies the variant's values in the caches (the fields added later only when they are set)."""
        base = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)[:7]]
        extra = [f"{n}={getattr(self, n)!r}" for n in ("slo_scale", "top_scale") if getattr(self, n) != 1.0]
        extra += [f"repaired_drafter={self.repaired_drafter!r}"] if self.repaired_drafter else []
        return f"Variant({', '.join(base + extra)})"


# Landscapes per space (twelve, and two added later for the user story's drafters): the profile as calibrated, and
# perturbations in different physical directions (the drafter's quality and cost, link speed, memory per GPU,
# per-sequence cost, SLO tightness, the top load). In the
# calibrated Kimi profile speculation never pays at 128 concurrent requests; with a cheaper, better drafter
# ("good-drafter") it does, uncapped, which is the case the user story hopes for.
VARIANTS: tuple[Variant, ...] = (
    Variant("base"),
    Variant(
        "good-drafter", accept_scale=1.3, drafter_cost_scale=0.3, allreduce_scale=0.8, mem_scale=0.97, accept_len=3.5
    ),
    Variant("slow-links", accept_scale=0.85, allreduce_scale=1.5, per_seq_scale=1.2, accept_len=2.2),
    Variant(
        "tight-memory", accept_scale=1.1, drafter_cost_scale=0.5, mem_scale=0.92, per_seq_scale=0.8, accept_len=2.8
    ),
    Variant("fast-links", accept_scale=0.95, allreduce_scale=0.6, per_seq_scale=0.9),
    Variant("poor-drafter", accept_scale=0.75, drafter_cost_scale=1.3, accept_len=1.6),
    Variant("big-memory", mem_scale=1.15, per_seq_scale=1.1, accept_scale=1.05),
    Variant("heavy-attention", per_seq_scale=1.6, accept_scale=1.05, drafter_cost_scale=0.8, accept_len=2.6),
    Variant("tight-slo", slo_scale=0.8, accept_scale=1.15, drafter_cost_scale=0.6, accept_len=3.0),
    Variant("loose-slo", slo_scale=1.5, allreduce_scale=1.2, mem_scale=0.95),
    Variant("low-load", top_scale=0.5, accept_scale=1.1, drafter_cost_scale=0.7, accept_len=3.0),
    Variant("high-load", top_scale=2.0, slo_scale=2.0, mem_scale=1.05, per_seq_scale=0.9),
    # added later (the first twelve keep their cache keys): the user story's custom drafter repaired (accept length
    # about 2.7 at 3 steps, a drafter trained on the served model's outputs) and cheaper, so the best config uses a
    # drafter no seed point uses; and a better one still at half the top load, where speculation pays more
    Variant("fixed-drafter", repaired_drafter=1.6, drafter_cost_scale=0.4),
    Variant("fixed-drafter-mid-load", repaired_drafter=1.9, drafter_cost_scale=0.3, top_scale=0.5),
)


def vary_spec(spec: StudySpec, v: Variant) -> StudySpec:
    """The study as the variant sees it: SLO bounds scaled by ``slo_scale``, the top load level by ``top_scale``."""
    if v.slo_scale != 1.0:
        spec = dataclasses.replace(
            spec,
            constraints=tuple(
                dataclasses.replace(c, max=c.max * v.slo_scale if c.max is not None else None) for c in spec.constraints
            ),
        )
    if v.top_scale != 1.0:
        levels = spec.plan.concurrencies
        top = max(levels)
        new_top = max(int(round(top * v.top_scale)), 1)
        kept = [lv for lv in levels if lv != top and lv < new_top]
        spec = dataclasses.replace(spec, plan=dataclasses.replace(spec.plan, concurrencies=(*kept, new_top)))
    return spec


def perturb(profile: Profile, v: Variant) -> Profile:
    hw, m = profile.hardware, profile.model
    a = v.allreduce_scale
    hw = dataclasses.replace(
        hw,
        gpu_mem_gb=hw.gpu_mem_gb * v.mem_scale,
        nccl_channel_bw_gbps=hw.nccl_channel_bw_gbps / a,
        link_bw_gbps=hw.link_bw_gbps / a,
        nccl_call_overhead_us=hw.nccl_call_overhead_us * a,
        custom_ar_latency_us=hw.custom_ar_latency_us * a,
        custom_ar_bw_gbps=hw.custom_ar_bw_gbps / a,
    )
    m = dataclasses.replace(m, per_seq_us=m.per_seq_us * v.per_seq_scale)
    drafters = profile.drafters
    working = [d for d in drafters if any(p > 0 for p in d.accept_probs)]
    if v.repaired_drafter and working:
        best = max(working, key=lambda d: sum(d.accept_probs))
        drafters = tuple(
            d
            if d in working
            else dataclasses.replace(
                d,
                accept_probs=tuple(min(p * v.repaired_drafter, 0.95) for p in best.accept_probs),
                accept_decay=best.accept_decay,
                topk_miss_ratio=best.topk_miss_ratio,
            )
            for d in drafters
        )
    drafters = tuple(
        dataclasses.replace(
            d,
            accept_probs=tuple(min(p * v.accept_scale, 0.95) for p in d.accept_probs),
            layer_floor_us=d.layer_floor_us * v.drafter_cost_scale,
            step_fixed_us=d.step_fixed_us * v.drafter_cost_scale,
            per_seq_us=d.per_seq_us * v.drafter_cost_scale,
            accept_token_us=d.accept_token_us * v.drafter_cost_scale,
        )
        for d in drafters
    )
    return dataclasses.replace(profile, hardware=hw, model=m, drafters=drafters)


@dataclass(frozen=True)
class Outcome:
    """What one trial of a point records, before noise. ``metrics`` are at the top load level."""

    outcome: str  # "invalid", "failed" or "complete"
    failure: FailureKind | None
    objective: float  # the study's primary objective (0 unless complete)
    metrics: Mapping[str, float]  # constraint metrics by key ("ttft_ms.p99@max")
    feasible: bool  # complete and every constraint met
    message: str = ""
    accept_length: float | None = None  # tokens per verify step at the top level (speculative points)
    kv_tokens: int | None = None  # the KV cache the launch allocated (SGLang logs it)

    @property
    def launched(self) -> bool:
        return self.outcome != "invalid"

    @property
    def true_value(self) -> float:
        """What the point is worth to the user: its objective if it runs within the SLOs, else nothing."""
        return self.objective if self.feasible else 0.0


_FAILURE_BY_PHASE = {
    "load": FailureKind.OOM_AT_LAUNCH,
    "kv": FailureKind.OOM_AT_LAUNCH,
    "capture": FailureKind.GRAPH_CAPTURE_FAILED,
    "warmup": FailureKind.CRASHED_AT_LAUNCH,
}


def percentile(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return math.inf
    k = (len(s) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class Landscape:
    """One space on one perturbed profile. Thread-unsafe cache; one per process."""

    def __init__(self, spec: StudySpec, variant: Variant = VARIANTS[0]) -> None:
        if spec.sim is None:
            raise LandscapeError(f"{spec.source}: the study has no sim profile (sim.profile); the landscape needs one")
        if len(spec.objectives) != 1 or spec.objectives[0].direction != "maximize":
            raise LandscapeError(f"{spec.source}: the benchmark handles one maximized objective")
        spec = vary_spec(spec, variant)
        self.spec = spec
        self.variant = variant
        self.profile = perturb(load_profile(spec.sim.profile), variant)
        self.top = max(spec.plan.concurrencies)
        self.input_len = spec.workload.input_len
        self.output_len = spec.workload.output_len
        self.objective_key = objective_key(spec.objectives[0].metric, spec.objectives[0].level)
        self._cache: dict[Any, Outcome] = {}
        self._runs: dict[Any, dict[str, float]] = {}

    def dump_runs(self) -> list[Any]:
        """The simulated runs so far (JSON), to spare a later process the same simulations."""
        return [[[list(map(list, k[0])), list(map(list, k[1])), k[2]], v] for k, v in self._runs.items()]

    def load_runs(self, rows: list[Any]) -> None:
        for (flags, env, bucket), metrics in rows:
            key = (tuple(tuple(x) for x in flags), tuple(tuple(x) for x in env), bucket)
            self._runs.setdefault(key, {k: float(v) for k, v in metrics.items()})

    @property
    def name(self) -> str:
        return f"{self.spec.name}/{self.variant.name}"

    def evaluate(self, params: Mapping[str, Any]) -> Outcome:
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._evaluate(params)
        return hit

    def _env(self, env: Mapping[str, str]) -> dict[str, str]:
        out = dict(env)
        if self.variant.accept_len is not None and "SGLANG_SIMULATE_ACC_LEN" in out:
            out["SGLANG_SIMULATE_ACC_LEN"] = str(self.variant.accept_len)
        return out

    def _evaluate(self, params: Mapping[str, Any]) -> Outcome:
        tc = to_trial_config(self.spec, params)
        env = self._env(tc.env)
        problems = sglang_rules.violations(tc.flags, env, tp_size=tc.tp_size)
        if problems:
            return Outcome("invalid", FailureKind.INVALID_CONFIG, 0.0, {}, False, problems[0])
        argv = ["--model-path", tc.model_path, "--tp-size", str(tc.tp_size), *flags_to_argv(tc.flags)]
        try:
            cfg = resolve(parse_args(argv), self.profile, env)
        except ArgsFailure as exc:
            return Outcome("failed", FailureKind.CRASHED_AT_LAUNCH, 0.0, {}, False, str(exc))
        if cfg.failure is not None:
            return Outcome(
                "failed",
                _FAILURE_BY_PHASE.get(cfg.failure.phase, FailureKind.CRASHED_AT_LAUNCH),
                0.0,
                {},
                False,
                cfg.failure.lines[0],
            )
        metrics = self._run(cfg, tc.flags, env)
        objective = metrics[self.spec.objectives[0].metric]
        cons: dict[str, float] = {}
        feasible = True
        for c in self.spec.constraints:
            if c.metric not in metrics:
                raise LandscapeError(
                    f"constraint metric {c.metric!r} is not simulated here; use one of {sorted(metrics)}"
                )
            v = metrics[c.metric]
            cons[objective_key(c.metric, c.level)] = v
            if (c.max is not None and v > c.max) or (c.min is not None and v < c.min):
                feasible = False
        return Outcome(
            "complete",
            None,
            objective,
            cons,
            feasible,
            accept_length=metrics.get("accept_length") if cfg.spec is not None else None,
            kv_tokens=cfg.kv_tokens,
        )

    def _run(self, cfg: SimConfig, flags: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, float]:
        # the cache cannot hold more than the running batch needs: the top load or the running cap, whichever is less
        ceiling = min(self.top, cfg.max_running_requests) * (self.input_len + self.output_len) * 1.1
        kv = min(cfg.kv_tokens, ceiling)
        bucket = round(math.log(max(kv, 1.0)) / math.log(KV_BUCKET))
        key = (
            tuple(sorted((k, repr(v)) for k, v in flags.items() if k != MEM_FLAG)),
            tuple(sorted(env.items())),
            bucket,
        )
        hit = self._runs.get(key)
        if hit is None:
            kv_tokens = int(KV_BUCKET**bucket) if cfg.kv_tokens < ceiling else cfg.kv_tokens
            hit = self._runs[key] = closed_loop(
                dataclasses.replace(cfg, kv_tokens=kv_tokens),
                self.top,
                max(2 * self.top, 16),
                self.input_len,
                self.output_len,
            )
        return hit


def closed_loop(cfg: SimConfig, concurrency: int, requests: int, input_len: int, output_len: int) -> dict[str, float]:
    """``concurrency`` clients in virtual time; the metrics a benchmark level reports (ms, tokens/s)."""
    done, now = simulate_closed_loop(cfg, concurrency, requests, input_len, output_len)
    ttft = [(r.first_token_at - r.arrival) * 1000 for r in done if r.first_token_at is not None]
    tpot = [
        (r.finished_at - r.first_token_at) * 1000 / (r.output - 1)
        for r in done
        if r.finished_at is not None and r.first_token_at is not None and r.output > 1
    ]
    verify = sum(r.verify_ct for r in done)
    per_step = sum(r.output for r in done) / verify if verify and cfg.spec else 1.0
    out_tokens = sum(r.output for r in done)
    return {
        "output_tok_per_s": out_tokens / now if now > 0 else 0.0,
        "ttft_ms.p99": percentile(ttft, 0.99),
        "ttft_ms.median": percentile(ttft, 0.5),
        "tpot_ms.median": statistics.median(tpot) if tpot else math.inf,
        "tpot_ms.p99": percentile(tpot, 0.99),
        # tokens of a speculative step arrive together: the gap between arrivals is a step, not a token
        "itl_ms.p99": percentile(tpot, 0.99) * per_step,
        "itl_ms.median": (statistics.median(tpot) if tpot else math.inf) * per_step,
        "accept_length": per_step,
    }


def enumerate_points(spec: StudySpec, *, float_points: int | None = None) -> list[dict[str, Any]]:
    """Every point of the space, parameters in file order, inactive ones absent (as ``suggest`` returns them).

    A float parameter takes its declared step, else ``FLOAT_GRID_STEP`` apart, or ``float_points`` evenly spaced values.
    """
    choices = {p.name: _values(p, float_points) for p in spec.params}
    return list(walk_points(spec, lambda p: choices[p.name]))


def _values(p: Any, float_points: int | None) -> list[Any]:
    if p.type == "categorical":
        return list(p.choices)
    if p.type == "bool":
        return [False, True]
    lo, hi = p.low, p.high
    if p.type == "int":
        return list(range(int(lo), int(hi) + 1, int(p.step or 1)))
    if float_points:  # at the precision the study searches (``round``), as the sampler's values are
        return list(dict.fromkeys(rounded(p, lo + (hi - lo) * k / (float_points - 1)) for k in range(float_points)))
    step = p.step or FLOAT_GRID_STEP
    n = int(round((hi - lo) / step))
    return [round(lo + step * k, 6) for k in range(n + 1)]


@dataclass(frozen=True)
class Optimum:
    value: float
    params: dict[str, Any]
    points: int  # points enumerated
    feasible: int  # of the points evaluated, those within the SLOs


def optimum(land: Landscape, *, exhaustive: bool = False) -> Optimum:
    """The best true value over the enumerated space (floats on the ``FLOAT_GRID_STEP`` grid).

    Unless ``exhaustive``, points that differ only in ``mem_fraction_static`` are tried from the largest value down and
    the first within the SLOs ends the group: more memory for the KV cache never lowers throughput in the simulator's
    scheduler (it admits more requests and retracts fewer), so the largest feasible value is the group's best.
    ``tests/benchmarks`` checks this against the exhaustive optimum on a small space.
    """
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    n = 0
    for point in enumerate_points(land.spec):
        n += 1
        rest = tuple(sorted((k, repr(v)) for k, v in point.items() if k != _mem_param(land.spec)))
        groups.setdefault(rest, []).append(point)
    best, arg, feasible = 0.0, {}, 0
    mem = _mem_param(land.spec)
    for members in groups.values():
        if mem is not None and not exhaustive:
            members = sorted(members, key=lambda p: -float(p.get(mem) or 0.0))
        for point in members:
            o = land.evaluate(point)
            feasible += o.feasible
            if o.true_value > best:
                best, arg = o.true_value, point
            if o.feasible and not exhaustive:
                break
    return Optimum(best, arg, n, feasible)


def _mem_param(spec: StudySpec) -> str | None:
    return next((p.name for p in spec.params if p.flag == MEM_FLAG), None)


def noisy(outcome: Outcome, noise: float, rng: random.Random) -> tuple[float, dict[str, float]]:
    """A measurement: the objective and each constraint metric times an independent factor 1 + noise * N(0, 1)."""

    def f() -> float:
        return max(1.0 + noise * rng.gauss(0.0, 1.0), 0.5) if noise > 0 else 1.0

    return outcome.objective * f(), {k: v * f() for k, v in outcome.metrics.items()}


__all__ = [
    "Landscape",
    "Optimum",
    "Outcome",
    "VARIANTS",
    "Variant",
    "enumerate_points",
    "noisy",
    "optimum",
    "perturb",
    "vary_spec",
]
