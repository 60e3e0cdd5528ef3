"""Studies on a landscape: the project's searcher (as the Ray Tune trainable calls it, without Ray), random, grid.

Every method pays for a launch only where a study would: a point SGLang's rules reject is recorded INVALID without a
launch, a repeat the searcher answers from its earlier result costs nothing, a failed launch (OOM, capture) counts.
After each launch the config autotune would export (``autotune.export.best.select_best`` over the measured records,
ranked by the model's estimates as the study's export step ranks them) is judged by its TRUE value on the landscape.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune.search import Searcher

from autotune.bench.types import BenchResult, LevelSummary
from autotune.export.best import check_objectives, select_best
from autotune.finalists.choice import decide, run_trial_id, stage_finalists
from autotune.finalists.outcome import FinalistRun, StagePlan
from autotune.study.model_rank import ModelRank
from autotune.study.optuna_study import open_study
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import PhaseTimings, TrialOutcome, TrialRecord
from autotune.trial.score import objective_key
from benchmarks.search.baseline import BaselineSearcher, open_baseline_study
from benchmarks.search.landscape import Landscape, enumerate_points, noisy

GRID_FLOAT_POINTS = 4  # a float parameter's values on the grid: low, two between, high


@dataclass(frozen=True)
class Run:
    """One simulated study. ``ratios[n]``: true value of the exported config after n + 1 launches / the optimum."""

    method: str
    space: str
    variant: str
    noise: float
    seed: int
    optimum: float
    ratios: tuple[float, ...]
    launched: tuple[dict[str, Any], ...]  # the launched points, in order
    suggested: int  # points the method proposed (launches, invalid points, repeats answered without a launch)
    invalid: int
    failed: int  # launches that failed (OOM, capture)
    infeasible: int  # launches that completed but broke an SLO (true value)
    repeats: int  # launches of a point already measured
    seed_within_2pct: bool  # a points_to_evaluate entry is already within 2% of the optimum
    # The study's finalist stage after the budget (autotune.finalists.choice, as the driver runs it before export): the top
    # ``count`` feasible configs by measured value, and the study's baseline where it completed outside them, relaunched
    # ``rounds`` times each, the winner decided from the relaunches (where it decides nothing, the single-launch export);
    # its true value / the optimum, and the relaunches it cost. None: no stage was asked for.
    finalist_ratio: float | None = None
    finalist_launches: int = 0
    finalist_method: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Lab:
    """Measures points on a landscape with noise, keeps the records, answers what autotune would export."""

    def __init__(self, land: Landscape, noise: float, seed: int, optimum: float) -> None:
        self.land, self.noise, self.optimum = land, noise, optimum
        self.rng = random.Random(f"noise-{seed}")
        self.records: list[TrialRecord] = []
        self.ratios: list[float] = []
        self.launched: list[dict[str, Any]] = []
        self.invalid = self.failed = self.infeasible = self.repeats = 0
        self._seen: set[str] = set()
        spec = land.spec
        self.objectives = check_objectives(spec.objectives)
        self.rank = ModelRank(spec)

    def record(self, number: int, trial_id: str, params: dict[str, Any]) -> TrialRecord:
        """The trial's record; a launch is counted unless the point is invalid."""
        out = self.land.evaluate(params)
        if out.outcome == "invalid":
            self.invalid += 1
            return self.measure(number, trial_id, params)
        key = json.dumps(params, sort_keys=True, default=str)
        self.repeats += key in self._seen
        self._seen.add(key)
        self.failed += out.outcome == "failed"
        self.infeasible += out.outcome != "failed" and not out.feasible
        rec = self.measure(number, trial_id, params)
        self.records.append(rec)
        self.launched.append(dict(params))
        best = self.exported()
        true = self.land.evaluate(best.params).true_value if best is not None else 0.0
        self.ratios.append(true / self.optimum if self.optimum > 0 else 0.0)
        return rec

    def exported(self) -> TrialRecord | None:
        """The config the study would export now, before any finalist stage: ``autotune.export.best.select_best``
        with the model's estimates, as the study's export step asks for them (``autotune.study.model_rank``)."""
        return select_best(self.records, self.objectives, self.rank.estimates(self.records)).record

    def measure(self, number: int, trial_id: str, params: dict[str, Any]) -> TrialRecord:
        """One launch of ``params`` measured with fresh noise: its record, no bookkeeping."""
        spec = self.land.spec
        out = self.land.evaluate(params)
        base = dict(study=spec.name, trial_id=trial_id, number=number, params=dict(params), flags={}, env={}, argv=[])
        if out.outcome == "invalid":
            return TrialRecord(**base, outcome=TrialOutcome.INVALID, failure=out.failure, message=out.message)
        if out.outcome == "failed":
            rec = TrialRecord(**base, outcome=TrialOutcome.FAILED, failure=out.failure, message=out.message)
        else:
            value, metrics = noisy(out, self.noise, self.rng)
            cons: dict[str, float] = {}
            for c in spec.constraints:
                k = objective_key(c.metric, c.level)
                parts = ([metrics[k] - c.max] if c.max is not None else []) + (
                    [c.min - metrics[k]] if c.min is not None else []
                )
                cons[k] = max(parts) if parts else 0.0
            # the searcher reads the accept length SGLang reports (a broken drafter); the other level fields are unused
            level = LevelSummary(
                concurrency=self.land.top,
                requests=0,
                failed=0,
                duration_s=0.0,
                output_tok_per_s=value,
                request_per_s=0.0,
                input_tok_per_s=0.0,
                ttft_ms=None,
                itl_ms=None,
                tpot_ms=None,
                e2e_ms=None,
                accept_length=out.accept_length,
            )
            # the KV cache SGLang logs at launch ("KV Cache is allocated. #tokens: N"), as the runner keeps it
            rec = TrialRecord(
                **base,
                outcome=TrialOutcome.COMPLETE,
                objectives={self.land.objective_key: value},
                constraints=cons,
                feasible=all(v <= 0 for v in cons.values()),
                bench=BenchResult(levels=(level,)),
                phases=PhaseTimings(kv_cache_tokens=out.kv_tokens),
            )
        return rec

    def finalists(self, count: int, rounds: int) -> tuple[float | None, int, str]:
        """The finalist stage on this study's records (``autotune.finalists.choice``, the study's export rule): the true
        value ratio of the config the study exports after it, the relaunches it made, and how it decided. Where the
        stage decides nothing (no feasible launch to relaunch, or no clean relaunch: method ``none``) the export keeps
        the config chosen from the single launches (``autotune.export.best.apply_finalists``), so that is judged."""
        if count <= 0 or rounds <= 0:
            return None, 0, ""
        obj = self.objectives[0]
        # the top ``count`` feasible launches and the study's baseline, as the driver relaunches them
        chosen = stage_finalists(self.records, obj.key, obj.direction, count, self.land.spec.baseline)
        trials = {r.number: r for r in self.records if r.number in chosen}
        runs = [
            FinalistRun(
                stage=1,
                round=rnd,
                repeats=n,
                repeats_trial_id=trials[n].trial_id,
                record=self.measure(n, run_trial_id(trials[n].trial_id, 1, rnd), dict(trials[n].params)),
            )
            for rnd, n in StagePlan(1, chosen, rounds).slots()
        ]
        # the study's decision (``study_outcome`` pools one complete stage so) over these finalists
        decision = decide(trials, runs, obj, alpha=0.05) if chosen else None
        if decision is not None and decision.winner is not None:
            winner: TrialRecord | None = trials[decision.winner]
        else:
            winner = self.exported()
        true = self.land.evaluate(dict(winner.params)).true_value if winner is not None else 0.0
        method = decision.method if decision is not None else "none"
        return (true / self.optimum if self.optimum > 0 else 0.0), len(runs), method

    def run(self, method: str, seed: int, suggested: int, finalists: tuple[int, int] = (0, 0)) -> Run:
        spec = self.land.spec
        seeds_true = [self.land.evaluate(dict(p)).true_value for p in spec.points_to_evaluate]
        f_ratio, f_launches, f_method = self.finalists(*finalists)
        return Run(
            method,
            spec.name,
            self.land.variant.name,
            self.noise,
            seed,
            self.optimum,
            tuple(self.ratios),
            tuple(self.launched),
            suggested,
            self.invalid,
            self.failed,
            self.infeasible,
            self.repeats,
            any(v >= 0.98 * self.optimum for v in seeds_true),
            f_ratio,
            f_launches,
            f_method,
        )


PROPOSALS_PER_LAUNCH = 20  # a run ends after this many proposals a launch (invalid points and repeats cost none)


def suggest_within(searcher: OptunaStudySearcher, trial_id: str, launches_left: int) -> Any:
    """``searcher.suggest`` with the launches left in the run as its budget left, as in a study whose budget is the
    run's launches: the seed points kept for last (the ``defer`` rule) are launched at the run's end, as the study
    launches them, not never (they are due only when as many launches of the budget are left)."""
    searcher.budget = searcher.suggested + launches_left
    return searcher.suggest(trial_id)


def run_searcher(
    land: Landscape,
    optimum: float,
    *,
    sampler: str,
    seed: int,
    noise: float,
    launches: int,
    slots: int = 1,
    method: str | None = None,
    baseline: bool = False,
    finalists: tuple[int, int] = (0, 0),
) -> Run:
    """The study's own searcher: ``suggest`` for up to ``slots`` trials at once, ``on_trial_complete`` in order.
    ``baseline``: the searcher before issue #14 (``benchmarks.search.baseline``); with ``sampler="random"`` it is
    plain random sampling after the study file's seed points."""
    spec = dataclasses.replace(land.spec, sampler=sampler, seed=seed, name=f"bench-{sampler}-{seed}")
    if baseline:
        study = open_baseline_study(spec)
        make_searcher: Callable[..., OptunaStudySearcher] = BaselineSearcher
    else:
        study = open_study(spec, None)  # in memory
        make_searcher = OptunaStudySearcher
    lab = Lab(land, noise, seed, optimum)

    def missing(number: int, trial_id: str, params: dict[str, Any], reason: str) -> TrialRecord:
        raise RuntimeError(f"the benchmark always reports a record; trial {number} had none ({reason})")

    searcher = make_searcher(spec, study, budget=launches, on_record=lambda r, log: None, make_missing_record=missing)
    pending: deque[tuple[str, dict[str, Any]]] = deque()
    n = 0
    finished = False
    while len(lab.ratios) < launches:
        while not finished and len(pending) < slots and len(lab.ratios) + len(pending) < launches:
            if n >= launches * PROPOSALS_PER_LAUNCH:
                finished = True
                break
            tid = f"t{n}"
            n += 1
            cfg = suggest_within(searcher, tid, launches - len(lab.ratios) - len(pending))
            if cfg is None or cfg == Searcher.FINISHED:
                finished = True
                break
            pending.append((tid, cfg))
        if not pending:
            break
        tid, cfg = pending.popleft()
        rec = lab.record(cfg["number"], tid, cfg["params"])
        searcher.on_trial_complete(tid, searcher.inbox.report(tid, rec.to_json()))
    return lab.run(method or ("autotune" if sampler == "tpe" else sampler), seed, n, finalists)


def run_grid(
    land: Landscape, optimum: float, *, seed: int, noise: float, launches: int, finalists: tuple[int, int] = (0, 0)
) -> Run:
    """The study's seed points, then the grid (floats at ``GRID_FLOAT_POINTS`` values) in a seeded random order."""
    lab = Lab(land, noise, seed, optimum)
    grid = enumerate_points(land.spec, float_points=GRID_FLOAT_POINTS)
    random.Random(f"grid-{seed}").shuffle(grid)
    points = [dict(p) for p in land.spec.points_to_evaluate] + grid
    seen: set[str] = set()
    n = 0
    for params in points:
        if len(lab.ratios) >= launches:
            break
        key = json.dumps(params, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        n += 1
        lab.record(n, f"g{n}", params)
    return lab.run("grid", seed, n, finalists)
