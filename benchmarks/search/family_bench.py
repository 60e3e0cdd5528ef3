"""The searcher, the same pipeline with random sampling, a grid and one-rule ablations on the landscape families.

    PYTHONPATH=$PWD python -m benchmarks.search.family_bench run --out benchmarks/search/results/families.json.gz \
        [--families ...] [--spaces ...] [--instances 2] [--seeds 6] [--noise 0 0.04 0.1] [--launches 40] \
        [--methods autotune pipeline-random grid no-coord ...] [--ablation-noise 0.04]
    python -m benchmarks.search.family_bench table FILE.json.gz ... [--judge]

Methods (every one the study's own ``OptunaStudySearcher``, driven as Ray Tune drives it, except ``grid``):

- ``autotune``: the searcher as it is (TPE and the model of the measurements taking turns, every rule);
- ``tpe-only``: the searcher before round 7 (TPE alone, every rule; ``autotune`` in files made before then);
- ``pipeline-random``: the same pipeline (seed points, repairs, set-asides, listing, export rule) with Optuna's
  ``RandomSampler`` and none of the ordering rules (the seed points kept for last launched with the others);
- ``grid``: the seed points, then every point of the space (floats at 4 values) in a seeded random order;
- ablations, each the searcher without one rule: ``no-defer`` (seed points launched last), ``no-repair`` (the repair
  of cap and memory), ``no-learned`` (the broken-drafter set-aside), ``no-new-cells`` (the new-cells rule, round 30),
  ``tpe-plain`` (TPE in the pipeline-random pipeline: the sampler alone);
- other samplers in the same pipeline: ``tpe-random-half`` (every second launch a uniform draw), ``gp`` (Optuna's
  ``GPSampler``; needs PyTorch), ``tpe-startup-10``;
- round 5: ``tpe-stall-5``/``-8`` (uniform draws while the last 5/8 launches have not improved the best feasible
  value), ``tpe-indep`` (TPE without multivariate/group), ``tpe-gamma-25`` (TPE's good share 25% of the launches,
  not 10%), ``tpe-ei-4``/``-8``/``-64`` (TPE picks the best of 4/8/64
  draws from its good density, not of 24). Round 5 also judged ``tpe-relaunch`` (while 8 launches have not improved
  the best, relaunch once each of the 3 runner-ups within 8% of it) and ``tpe-local`` (every third launch a
  one-parameter move from one of the 3 best feasible points); neither paid, and their searcher subclasses were removed
  when the searcher gained its proposer (their code is at commit bea14e5; ``table`` still reads their results);
- round 6: ``gp-ei``, ``gp-ei-2``, ``gp-ei-4``: TPE's proposals replaced by three forms of a Gaussian-process model of
  the measurements; none paid (their code is at commit a204c5f);
- round 7: ``gp-tpe-alt``: the fourth form and TPE taking turns. It paid on landscapes no round had seen and is the
  searcher now (``autotune.study.model_proposer``); its files keep the name;
- round 8: ``gp-tpe-2of3``, ``gp-tpe-1of3``: the searcher with the model taking two, or one, proposals in three
  instead of one in two; ``gp-additive``: the searcher with an additive part in the model's kernel
  (``benchmarks.search.additive_gp``);
- round 9: ``autotune-mpick``, ``pipeline-random-mpick``: the launches of ``autotune`` and ``pipeline-random``
  replayed with the export picked by the model's estimate. It paid on landscapes no round had seen and is the export
  rule of every method now (``autotune.study.model_rank``); the replay's code is at commit 699ac12;
- round 10: ``gp-ts-alt``: the searcher with TPE's turns taken by a Thompson sample of the model. It gained on one set
  of unseen landscapes and not on the next; not kept (its code, ``benchmarks/search/thompson.py``, is at 16485b3).
- round 11: ``repair-evidence`` and ``repair-evidence-random``: the pipeline's repair standing aside while the
  launches holding the top load all break the constraints. It paid on landscapes no round had seen and is the
  product's repair now (``autotune.policy.repairing``), so ``autotune`` and ``pipeline-random`` run it; the
  candidate's code is at commit 9d7bdd6.
- round 12: ``cell-refine``: the searcher with the model's turn after a new best launch spent inside that launch's cell
  (every parameter but the real-valued ones fixed). It lost at the design and was not judged (its code is at 889a52d).
- round 13: ``novel-cell`` and ``novel-cell-random``: a proposal set aside while a completed launch holds its cell.
  It paid on landscapes no round had seen and is the product's ``new-cells`` rule now (``autotune.policy.cells``), so
  ``autotune`` and ``pipeline-random`` run it; the candidate's code is at commit 8b88c8c.
- round 15: ``best-cell``: ``new-cells`` leaving the best launch's cell open. It was no better on landscapes no round
  had seen and worse on ``needle``; not kept (its code is at 9118c40).
- round 16: ``gp-random``: the searcher with TPE's turns drawn by Optuna's ``RandomSampler`` (the model's turns and every
  rule kept). It needed more launches and exported worse configs on landscapes no round had seen, so TPE stays; the
  method stays as the measurement of TPE's part.
- round 17: ``model-any-cell`` (the model's proposals not set aside by ``new-cells``) and ``gp-additive`` again, now
  under ``new-cells``. Neither held on landscapes no round had seen; not kept (``model-any-cell``'s code is at 5636ca6).
- round 18: ``no-walk``: the searcher without the neighbour walk after three set-aside proposals. It was no better and
  no worse on landscapes no round had seen, so the walk stayed then (the other candidate, the walk's launch given to
  the model, is at dd21306; round 29 below removed the walk from listed spaces).
- round 19: ``gp-marginal``: the searcher with the model's hyperparameters integrated out. A launch or so ahead of
  the searcher on two sets of landscapes no round had seen, within noise; on six more instances (round 21) -0.3
  launches; not kept (its code is at 2820593).
- round 20: ``marginal-no-walk``: ``gp-marginal``'s model with ``no-walk``'s proposer. Within noise of the searcher on
  landscapes no round had seen; not kept (its code is at 901b8b2).
- round 22: ``model-fraction``: the searcher with the sampler's proposals launched at the memory fraction the model
  ranks first in their cell. No better on landscapes no round had seen, a worse export; not kept (its code is at
  b3be627).
- round 23: ``constraint-gp``: the searcher with the chance of a feasible launch from one GP a constraint fitted to
  the measured margins to its bound. More launches to 98% on landscapes no round had seen; not kept (its code is at
  1d5cd38).
- round 24: ``broken-margins``: ``constraint-gp`` for the constraints a completed launch broke only. More launches
  to 98% on its design landscapes; not judged, not kept (its code is at 16fa4aa).
- round 25: ``thompson-relaunch``: the searcher with the relaunches after a finite space is exhausted drawn by
  Thompson sampling over the measured points. No sooner at 4% noise; at 10% sooner on ``needle``, later on
  ``infeasible-large``; not kept (its code is at 2868dc2).
- round 26: ``ucb-relaunch``: the searcher with each relaunch after a finite space is exhausted at the measured point
  with the highest upper bound. Sooner at 10% noise on ``needle``, not clearly sooner over the judge families; not
  kept (its code is at 121946f).
- round 27: ``ucb-relaunch`` judged again, unchanged, on more fresh landscapes: sooner at 10% noise, no worse at 4%;
  kept. It is the searcher's since (``autotune.study.model_proposer``); runs recorded before then hold the searcher
  without it.
- round 28: ``ucb2-relaunch``: the searcher with two standard errors in that upper bound, not one. A third of a launch
  sooner at 4% noise, a worse export at 10%; not kept (its code is at 261fff4).
- round 29: ``no-walk`` judged again, for ``capacity``, the family table's worst family: 4.7 launches sooner there, no
  family worse; kept. The product's proposer walks only where the space cannot be listed since, so ``no-walk`` is the
  searcher on every benchmark space and was removed (its code is at ca138a8).
- round 30: ``no-new-cells`` and ``no-defer``, each rule removed in turn after decisions 0020-0021: both removals cost
  launches to 98% (+8.0 and +1.3); both rules stay.
- round 31: ``first-feasible``: the searcher with, while no launch is feasible, the chance of a feasible launch from
  one GP a constraint fitted to the measured margins. No sooner at 98% on landscapes no round had seen, and a worse
  export on ``capacity``; not kept (its code is at 25a1127).

Methods with a sampler of their own and ``tpe-only`` run with the pipeline's ``Proposer`` alone, as they were judged.

``--finalists COUNT ROUNDS`` adds the study's finalist stage after each run's launches (the product's export:
``autotune.finalists``); the run's ``finalist_ratio`` is the true value of what it exports. The launches are the same.

The results files of issue #29 also hold ablations of rules since removed from the searcher (``no-coord``: the
coordinate step; ``no-chain``: the chain speed model; ``no-cell``, ``no-broken``: the discrete-cell and broken-drafter
set-asides; ``no-equiv``: points that run the same at the top load set aside as repeats), run with the searcher of
41444b1, and round 4's ``no-screen`` (the pre-launch screen of proposals) and ``no-learned-memory`` (the set-asides
learnt from failed launches); ``table`` reads them as any other method.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from autotune.core.dashboard_attrs import named_constraints
from autotune.study.model_proposer import ModelProposer
from autotune.study.optuna_study import open_study
from autotune.study.proposer import Proposer
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import TrialRecord
from benchmarks.search import jsonio
from benchmarks.search.drivers import PROPOSALS_PER_LAUNCH, Lab, run_grid, suggest_within
from benchmarks.search.families import (
    DESIGN_FAMILIES,
    FAMILIES,
    FAMILY_VERSION,
    SPACES,
    FamilyLandscape,
    applies,
    family_optimum,
)
from benchmarks.search.metrics import POOR, TARGET, launches_to, ratio_at

# method -> (sampler, rules removed)
METHODS: dict[str, tuple[str, frozenset[str]]] = {
    "autotune": ("tpe", frozenset()),
    "pipeline-random": ("random", frozenset({"defer"})),
    "tpe-plain": ("tpe", frozenset({"defer"})),
    "no-defer": ("tpe", frozenset({"defer"})),
    "tpe-startup-10": ("tpe", frozenset()),  # issue #29's try: TPE's uniform startup draws 5 -> 10
    # round 4 of issue #29: other samplers in the same pipeline, and the pipeline's own rules removed one at a time
    "tpe-random-half": ("tpe", frozenset()),  # every second launch drawn uniformly (RandomSampler), the rest TPE
    "gp": ("tpe", frozenset()),  # Optuna's GPSampler (needs torch); conditional parameters drawn uniformly
    "no-repair": ("tpe", frozenset({"repair"})),  # proposals launched with the cap and memory TPE gave them
    "no-learned": ("tpe", frozenset({"learned"})),  # no set-aside learnt from the study's own results
    "no-new-cells": ("tpe", frozenset({"new-cells"})),  # round 30: settings a launch tried may be proposed again
    # round 5 of issue #29 (designed on the design families, judged on the others)
    "tpe-stall-5": ("tpe", frozenset()),  # uniform draws while 5+ launches have not improved the best
    "tpe-stall-8": ("tpe", frozenset()),  # the same after 8
    "tpe-indep": ("tpe", frozenset()),  # TPE without multivariate/group (each parameter on its own)
    "tpe-gamma-25": ("tpe", frozenset()),  # TPE's good share 10% -> 25% of the launches
    "tpe-ei-4": ("tpe", frozenset()),  # TPE picks the best of 4 draws from its good density, not of 24
    "tpe-ei-8": ("tpe", frozenset()),  # of 8
    "tpe-ei-64": ("tpe", frozenset()),  # of 64 (greedier)
    "tpe-only": ("tpe", frozenset()),  # the searcher before round 7: TPE without the model (autotune.study.proposer)
    # round 8: the model's share of the proposals, and its kernel
    "gp-tpe-2of3": ("tpe", frozenset()),  # the model proposes two in three, TPE the third
    "gp-tpe-1of3": ("tpe", frozenset()),  # the model proposes one in three, TPE the others
    "gp-additive": ("tpe", frozenset()),  # an additive part in the model's kernel (benchmarks.search.additive_gp)
    # round 16: the searcher with TPE's turns drawn uniformly (Optuna's RandomSampler); the model's turns and every rule kept
    "gp-random": ("tpe", frozenset()),
}
STARTUP_TRIALS = {"tpe-startup-10": 10}


class AlternatingSampler:
    """Draws a trial with ``explore`` when the study's completed trials number ``every - 1`` modulo ``every``, else
    with ``model``: a hedge that spends a fixed share of launches on uniform draws. The choice is made once per trial."""

    def __init__(self, model: Any, explore: Any, every: int) -> None:
        self.model, self.explore, self.every = model, explore, every
        self._pick: dict[int, Any] = {}

    def _of(self, study: Any, trial: Any) -> Any:
        import optuna

        if trial.number not in self._pick:
            done = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))
            self._pick[trial.number] = self.explore if done % self.every == self.every - 1 else self.model
        return self._pick[trial.number]

    def infer_relative_search_space(self, study: Any, trial: Any) -> Any:
        return self._of(study, trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study: Any, trial: Any, space: Any) -> Any:
        return self._of(study, trial).sample_relative(study, trial, space)

    def sample_independent(self, study: Any, trial: Any, name: str, dist: Any) -> Any:
        return self._of(study, trial).sample_independent(study, trial, name, dist)

    def before_trial(self, study: Any, trial: Any) -> None:
        self._of(study, trial).before_trial(study, trial)

    def after_trial(self, study: Any, trial: Any, state: Any, values: Any) -> None:
        self._of(study, trial).after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.model.reseed_rng()
        self.explore.reseed_rng()


def _tpe(seed: int, **kw: Any) -> Any:
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        base = dict(seed=seed, multivariate=True, group=True, n_startup_trials=5, constant_liar=True)
        return optuna.samplers.TPESampler(**{**base, **kw})


def _gp(seed: int) -> Any:
    import warnings

    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=5, warn_independent_sampling=False)


def _half(seed: int) -> Any:
    import optuna

    return AlternatingSampler(_tpe(seed), optuna.samplers.RandomSampler(seed=seed), 2)


class StallSampler(AlternatingSampler):
    """Draws a trial with ``explore`` while the last ``patience`` completed launches have not improved the best
    feasible first objective (a restart of exploration when the model's proposals stall), else with ``model``."""

    def __init__(self, model: Any, explore: Any, patience: int) -> None:
        super().__init__(model, explore, 0)
        self.patience = patience

    def _of(self, study: Any, trial: Any) -> Any:

        if trial.number not in self._pick:
            self._pick[trial.number] = self.explore if since_best(study) >= self.patience else self.model
        return self._pick[trial.number]


def since_best(study: Any) -> int:
    """Completed launches since the last one that improved the best feasible first objective."""
    import optuna

    sign = 1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else -1.0
    best, since = -math.inf, 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        since += 1
        if all(c <= 0 for c in named_constraints(t.constraints).values()) and sign * t.values[0] > best:
            best, since = sign * t.values[0], 0
    return since


def _stall(patience: int) -> Any:
    import optuna

    return lambda seed: StallSampler(_tpe(seed), optuna.samplers.RandomSampler(seed=seed), patience)


SAMPLERS = {
    "tpe-random-half": _half,
    "gp": _gp,
    "tpe-stall-5": _stall(5),
    "tpe-stall-8": _stall(8),
    "tpe-indep": lambda seed: _tpe(seed, multivariate=False, group=False),
    "tpe-gamma-25": lambda seed: _tpe(seed, gamma=lambda n: min(math.ceil(0.25 * n), 25)),
    "tpe-ei-4": lambda seed: _tpe(seed, n_ei_candidates=4),
    "tpe-ei-8": lambda seed: _tpe(seed, n_ei_candidates=8),
    "tpe-ei-64": lambda seed: _tpe(seed, n_ei_candidates=64),
}


class TwoInThree(ModelProposer):
    """The searcher's proposer with the model taking two proposals in three."""

    def _models_turn(self, turn: int) -> bool:
        return turn % 3 != 0


class OneInThree(ModelProposer):
    """The searcher's proposer with the model taking one proposal in three."""

    def _models_turn(self, turn: int) -> bool:
        return turn % 3 == 1


class AdditiveModel(ModelProposer):
    """The searcher's proposer with the additive model of ``benchmarks.search.additive_gp``."""

    def _gp(self, *args: Any) -> Any:
        from benchmarks.search.additive_gp import AdditiveGP

        return AdditiveGP(*args)


PROPOSERS: dict[str, Any] = {
    "gp-tpe-2of3": TwoInThree,
    "gp-tpe-1of3": OneInThree,
    "gp-additive": AdditiveModel,
}


def _random(seed: int) -> Any:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


# the searcher (the model's turns included) with its sampler's turns taken by another sampler
MODEL_SAMPLERS: dict[str, Any] = {"gp-random": _random}
# methods judged without the model of the measurements (the searcher of rounds 1-6 and its sampler variants)
TPE_ALONE = {"tpe-only", *SAMPLERS, *STARTUP_TRIALS}


class AblatedSearcher(OptunaStudySearcher):
    """The searcher with the named rules removed (``METHODS``; ``autotune.policy.defaults`` names them); the rest as
    it is."""

    def __init__(self, spec: Any, *args: Any, removed: frozenset[str] = frozenset(), **kwargs: Any) -> None:
        from autotune.policy.defaults import default_rules

        rules = default_rules(spec).without(*sorted(removed - {"defer"}))
        super().__init__(spec, *args, rules=rules, **kwargs)
        self.removed = removed
        if "defer" in removed:  # the deferred seeds launched with the others, right after them
            for p in self.proposer.deferred:
                self.study.enqueue_trial(p, skip_if_exists=True)
            self.proposer.deferred = []


def run_method(
    land: FamilyLandscape,
    optimum: float,
    method: str,
    *,
    seed: int,
    noise: float,
    launches: int,
    finalists: tuple[int, int] = (0, 0),
    labs: list[Lab] | None = None,
) -> dict[str, Any]:
    """One run of ``method`` on ``land``, as JSON; ``labs``: where a diagnostic wants the run's ``Lab`` (its records
    and export ranking) appended."""
    if method == "grid":
        run = run_grid(land, optimum, seed=seed, noise=noise, launches=launches, finalists=finalists)  # type: ignore[arg-type]
        return run.to_json()
    import dataclasses

    sampler, removed = METHODS[method]
    spec = dataclasses.replace(land.spec, sampler=sampler, seed=seed, name=f"fam-{sampler}-{seed}")
    study = open_study(spec, None)
    if method in STARTUP_TRIALS:
        import warnings

        import optuna

        with warnings.catch_warnings():  # multivariate/group are "experimental", as in autotune.study.optuna_study
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.sampler = optuna.samplers.TPESampler(
                seed=seed, multivariate=True, group=True, constant_liar=True, n_startup_trials=STARTUP_TRIALS[method]
            )
    sampler_of = SAMPLERS | MODEL_SAMPLERS
    if method in sampler_of:
        study.sampler = sampler_of[method](seed)
    lab = Lab(land, noise, seed, optimum)  # type: ignore[arg-type]
    if labs is not None:
        labs.append(lab)

    def missing(number: int, trial_id: str, params: dict[str, Any], reason: str) -> TrialRecord:
        raise RuntimeError(f"the benchmark always reports a record; trial {number} had none ({reason})")

    searcher = AblatedSearcher(
        spec,
        study,
        budget=launches,
        on_record=lambda r, log: None,
        make_missing_record=missing,
        removed=removed,
        **({"proposer": Proposer} if method in TPE_ALONE else {}),
        **({"proposer": PROPOSERS[method]} if method in PROPOSERS else {}),
    )
    pending: deque[tuple[str, dict[str, Any]]] = deque()
    n = 0
    while len(lab.ratios) < launches and n < launches * PROPOSALS_PER_LAUNCH:
        tid = f"t{n}"
        n += 1
        cfg = suggest_within(searcher, tid, launches - len(lab.ratios))
        if cfg is None or cfg == Searcher.FINISHED:
            break
        pending.append((tid, cfg))
        tid, cfg = pending.popleft()
        rec = lab.record(cfg["number"], tid, cfg["params"])
        searcher.on_trial_complete(tid, searcher.inbox.report(tid, rec.to_json()))
    return lab.run(method, seed, n, finalists).to_json()


def relevant(method: str, land: FamilyLandscape) -> bool:
    """Whether removing the method's rules can change a run on this space; where it cannot, the run is the searcher's
    own (same sampler and seeds: the same launches) and is copied from it instead of simulated again."""
    from autotune.policy.prescreen import deferred_seeds

    if method not in METHODS or METHODS[method][0] != "tpe" or not METHODS[method][1] or method == "tpe-plain":
        return True
    rule = next(iter(METHODS[method][1]))
    return {"defer": bool(deferred_seeds(land.spec, land.sizes))}.get(rule, True)


def one_landscape(task: dict[str, Any]) -> list[dict[str, Any]]:
    from benchmarks.search.__main__ import load_space

    t0 = time.monotonic()
    land = FamilyLandscape(load_space(task["space"]), task["family"], task["instance"])
    opt = family_optimum(land)
    out = []
    for noise in task["noise"]:
        methods = (
            task["methods"]
            if noise in task["ablation_noise"]
            else [m for m in task["methods"] if m in task["headline"]]
        )
        for seed in range(task.get("first_seed", 0), task.get("first_seed", 0) + task["seeds"]):
            own: dict[str, Any] = {}
            for m in sorted(methods, key=lambda m: m != "autotune"):
                if m != "autotune" and "autotune" in own and not relevant(m, land):
                    r = {**own["autotune"], "method": m, "copied_from": "autotune"}
                else:
                    r = run_method(
                        land,
                        opt.value,
                        m,
                        seed=seed,
                        noise=noise,
                        launches=task["launches"],
                        finalists=tuple(task.get("finalists", (0, 0))),  # type: ignore[arg-type]
                    )
                own[m] = r
                r["family"], r["instance"] = task["family"], task["instance"]
                if m == "autotune" and task.get("autotune_as"):
                    r["method"] = task["autotune_as"]
                r.pop("launched", None)
                out.append(r)
    print(
        f"{land.name}: optimum {opt.value:.0f} ({opt.feasible}/{opt.points} feasible), {len(out)} runs in "
        f"{time.monotonic() - t0:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return out


def cmd_run(a: argparse.Namespace) -> int:
    from benchmarks.search.__main__ import load_space

    tasks = [
        dict(
            space=s,
            family=f,
            instance=i,
            noise=a.noise,
            seeds=a.seeds,
            first_seed=a.first_seed,
            methods=a.methods,
            launches=a.launches,
            ablation_noise=a.ablation_noise,
            headline=a.headline,
            autotune_as=a.autotune_as,
            finalists=a.finalists,
        )
        for f in a.families
        for s in a.spaces
        if applies(f, load_space(s))
        for i in range(a.first_instance, a.first_instance + a.instances)
    ]
    doc: dict[str, Any] = {
        "command": "python -m benchmarks.search.family_bench " + " ".join(sys.argv[1:]),
        "launches": a.launches,
        "synthetic": True,
        "family_version": FAMILY_VERSION,
        "design_families": list(DESIGN_FAMILIES),
        "complete": False,
        "runs": [],
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    for i, t in enumerate(tasks, 1):
        doc["runs"].extend(one_landscape(t))
        doc["complete"] = i == len(tasks)
        jsonio.dump(doc, a.out)
    print(table(doc["runs"], a.launches))
    return 0


# ---------------------------------------------------------------------------- summaries
def _median_ci(values: list[float], rng: random.Random, reps: int = 400) -> tuple[float, float, float]:
    """The median and a bootstrap 90% interval of it (inf: more than half never reached the target)."""
    med = statistics.median(values)
    boots = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(reps))
    return med, boots[int(0.05 * reps)], boots[int(0.95 * reps) - 1]


def _fmt(x: float, cap: int) -> str:
    return f">{cap}" if not math.isfinite(x) else f"{x:g}"


def summary(runs: list[dict[str, Any]], cap: int) -> dict[str, Any]:
    rng = random.Random(0)
    launches = [launches_to(r["ratios"], TARGET) for r in runs]
    med, lo, hi = _median_ci(launches, rng)
    below = [ratio_at(r["ratios"], cap) < POOR for r in runs]
    return {
        "runs": len(runs),
        "median": med,
        "lo": lo,
        "hi": hi,
        "below": sum(below) / len(below),
        "mean_capped": statistics.fmean(min(x, 2 * cap) for x in launches),
    }


def table(runs: list[dict[str, Any]], cap: int, *, judge_only: bool = False) -> str:
    """Per noise and family: median launches to 98% [90% bootstrap interval], export below 95% at ``cap`` launches,
    for every method; and each method's ratio to pipeline-random's median (the worst family's too)."""
    if judge_only:
        runs = [r for r in runs if r["family"] not in DESIGN_FAMILIES]
    methods = list(dict.fromkeys(r["method"] for r in runs))
    fams = [f for f in FAMILIES if any(r["family"] == f for r in runs)]
    lines = []
    for noise in sorted({r["noise"] for r in runs}):
        ms = [m for m in methods if any(r["method"] == m and r["noise"] == noise for r in runs)]
        paired = "autotune" in ms and "pipeline-random" in ms
        lines += [
            f"\n**noise {noise:.0%}** (median launches to 98% [90% interval] / export < 95% at {cap})\n",
            "| family | " + " | ".join(ms) + (" | autotune / pipeline-random (mean) |" if paired else " |"),
            "| --- |" + " ---: |" * (len(ms) + paired),
        ]
        ratios: dict[str, list[tuple[str, float]]] = {m: [] for m in ms}
        for f in [*fams, "all"]:
            cells = []
            for m in ms:
                sel = [r for r in runs if r["noise"] == noise and r["method"] == m and (f == "all" or r["family"] == f)]
                if not sel:
                    cells.append("-")
                    continue
                s = summary(sel, cap)
                cells.append(f"{_fmt(s['median'], cap)} [{_fmt(s['lo'], cap)}-{_fmt(s['hi'], cap)}] / {s['below']:.0%}")
                if f != "all":
                    ratios[m].append((f, s["mean_capped"]))
            if paired:
                means = {
                    m: summary(
                        [
                            r
                            for r in runs
                            if r["noise"] == noise and r["method"] == m and (f == "all" or r["family"] == f)
                        ],
                        cap,
                    )["mean_capped"]
                    for m in ("autotune", "pipeline-random")
                }
                cells.append(f"{means['autotune'] / means['pipeline-random']:.2f}")
            lines.append(f"| {f} | " + " | ".join(cells) + " |")
        base = dict(ratios.get("pipeline-random", []))
        if base:
            worst = []
            for m in ms:
                rs = [(f, v / base[f]) for f, v in ratios[m] if base.get(f)]
                if rs:
                    f, w = max(rs, key=lambda x: x[1])
                    worst.append(f"{w:.2f} ({f})")
                else:
                    worst.append("-")
            lines.append(
                "| worst family: mean launches to 98% / pipeline-random's | "
                + " | ".join(worst)
                + (" | |" if paired else " |")
            )
    return "\n".join(lines)


def rule_gains(runs: list[dict[str, Any]], cap: int) -> str:
    """Each ablation against the searcher, paired by landscape, noise and seed on the judge families where the rule
    can act (runs copied from the searcher left out): the mean of (launches to 98% without the rule) - (with it),
    never reached counted as ``2 * cap``, with a bootstrap 90% interval; and exports below 95% at ``cap`` with and
    without. A positive difference is the rule's gain."""
    judge = [r for r in runs if r["family"] not in DESIGN_FAMILIES]
    own = {(r["space"], r["variant"], r["noise"], r["seed"]): r for r in judge if r["method"] == "autotune"}
    lines = [
        "| method (a rule removed, or another searcher) | paired runs | launches to 98%: method - autotune [90% "
        "interval] | export < 95%: autotune / method |",
        "| --- | ---: | ---: | ---: |",
    ]
    rng = random.Random(0)
    for m in dict.fromkeys(r["method"] for r in judge if r["method"] not in ("autotune", "grid")):
        pairs = [
            (own[k], r)
            for r in judge
            if r["method"] == m
            and "copied_from" not in r
            and (k := (r["space"], r["variant"], r["noise"], r["seed"])) in own
        ]
        if not pairs:
            continue
        diffs = [min(launches_to(b["ratios"]), 2 * cap) - min(launches_to(a["ratios"]), 2 * cap) for a, b in pairs]
        boots = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(1000))
        poor_a = sum(ratio_at(a["ratios"], cap) < POOR for a, _ in pairs)
        poor_b = sum(ratio_at(b["ratios"], cap) < POOR for _, b in pairs)
        lines.append(
            f"| {m} | {len(pairs)} | {statistics.fmean(diffs):+.1f} [{boots[50]:+.1f}, {boots[949]:+.1f}] | "
            f"{poor_a} / {poor_b} |"
        )
    return "\n".join(lines)


def _paired(pairs: list[tuple[float, float]], rng: random.Random) -> str:
    """The mean of b - a over pairs with a bootstrap 90% interval."""
    diffs = [b - a for a, b in pairs]
    boots = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(1000))
    return f"{statistics.fmean(diffs):+.3g} [{boots[50]:+.3g}, {boots[949]:+.3g}]"


def family_pairs(runs: list[dict[str, Any]], cap: int, method: str) -> str:
    """``method`` against the searcher per family, paired by landscape, noise and seed: launches to 98% (never reached
    counted as ``2 * cap``) and, where both runs had the finalist stage (``--finalists``), the true value of what the
    stage exports as a share of the optimum; each the mean of method - autotune with a bootstrap 90% interval."""
    key = lambda r: (r["space"], r["variant"], r["noise"], r["seed"])  # noqa: E731
    own = {key(r): r for r in runs if r["method"] == "autotune"}
    rng = random.Random(0)
    lines = [
        f"| family | paired runs | launches to 98%: {method} - autotune | paired runs with finalists | finalist export "
        f"(share of the optimum): {method} - autotune | finalist export below 95%: autotune / {method} |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in [*FAMILIES, "judge families"]:
        pairs = [
            (own[key(r)], r)
            for r in runs
            if r["method"] == method
            and key(r) in own
            and (r["family"] == f or (f == "judge families" and r["family"] not in DESIGN_FAMILIES))
        ]
        if not pairs:
            continue
        launches = [(min(launches_to(a["ratios"]), 2 * cap), min(launches_to(b["ratios"]), 2 * cap)) for a, b in pairs]
        fin = [
            (a["finalist_ratio"], b["finalist_ratio"])
            for a, b in pairs
            if a.get("finalist_ratio") is not None and b.get("finalist_ratio") is not None
        ]
        fin_cells = (
            f"{len(fin)} | {_paired(fin, rng)} | {sum(a < POOR for a, _ in fin)} / {sum(b < POOR for _, b in fin)}"
            if fin
            else "0 | - | -"
        )
        lines.append(f"| {f} | {len(pairs)} | {_paired(launches, rng)} | {fin_cells} |")
    return "\n".join(lines)


def goal_table(
    runs: list[dict[str, Any]],
    cap: int,
    method: str = "autotune",
    noise: float = 0.04,
    against: str = "pipeline-random",
) -> str:
    """Issue #29's goal per family at one noise level: ``method``'s launches to 98% over ``against``'s, as the
    ratio of the means (never reached counted as ``2 * cap``) and of the medians (inf: more than half of ``method``'s
    runs never got there; where only ``against``'s did not, the bound ``method``'s median / (cap + 1), also in the
    bootstrap), each with a 90% bootstrap interval that resamples seeds (a seed drawn keeps its runs on every landscape
    of the family, for both methods); and the ratio of the means over the landscapes where some run of either method
    gets within 2% in the budget (a landscape neither does counts the same for both, pulling the ratio toward 1)."""
    sel = [r for r in runs if r["noise"] == noise and r["method"] in (method, against)]
    fams = [f for f in FAMILIES if any(r["family"] == f and r["method"] == method for r in sel)]
    rng, rng_in = random.Random(0), random.Random(1)
    lines = [
        f"| family | runs | mean launches to 98%: {method} / {against} [90% interval] | median: {method} / "
        f"{against} [90% interval] | mean, landscapes either reaches [90% interval] (landscapes) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    reached = {(r["space"], r["variant"]) for r in sel if launches_to(r["ratios"], TARGET) <= cap}

    def ratios(by_seed: dict[int, dict[str, list[float]]], seeds: list[int]) -> tuple[float, float]:
        a = [x for s in seeds for x in by_seed[s][method]]
        b = [x for s in seeds for x in by_seed[s][against]]
        mean = statistics.fmean(min(x, 2 * cap) for x in a) / statistics.fmean(min(x, 2 * cap) for x in b)
        ma, mb = statistics.median(a), statistics.median(b)
        # inf: only ``method``'s median is beyond the budget; only ``against``'s: the bound ma / (cap + 1); nan: both
        med = ma / mb if math.isfinite(mb) else (ma / (cap + 1) if math.isfinite(ma) else math.nan)
        return mean, med

    def launches_by_seed(
        family: str, seeds: Collection[int] | None = None, landscapes: Collection[tuple[str, str]] | None = None
    ) -> dict[int, dict[str, list[float]]]:
        """Each seed's launches to 98% for both methods on the family's landscapes (those of ``seeds`` and
        ``landscapes`` only, where given)."""
        out: dict[int, dict[str, list[float]]] = {}
        for r in sel:
            if (
                r["family"] == family
                and (seeds is None or r["seed"] in seeds)
                and (landscapes is None or (r["space"], r["variant"]) in landscapes)
            ):
                out.setdefault(r["seed"], {method: [], against: []})[r["method"]].append(
                    launches_to(r["ratios"], TARGET)
                )
        return out

    for f in fams:
        by_seed = launches_by_seed(f)
        seeds = sorted(s for s, d in by_seed.items() if d[method] and d[against])
        if not seeds:
            continue
        mean, med = ratios(by_seed, seeds)
        boots = [ratios(by_seed, rng.choices(seeds, k=len(seeds))) for _ in range(1000)]
        solved = launches_by_seed(f, seeds, reached)
        part = sorted(solved)
        sm = sorted(ratios(solved, rng_in.choices(part, k=len(part)))[0] for _ in range(1000)) if part else []
        lands = {(r["space"], r["variant"]) for r in sel if r["family"] == f}
        bm = sorted(b[0] for b in boots)
        bd = sorted((b[1] if not math.isnan(b[1]) else math.inf) for b in boots)
        n = sum(len(by_seed[s][method]) for s in seeds)

        def f2(x: float) -> str:
            return "-" if math.isnan(x) else ("inf" if math.isinf(x) else f"{x:.2f}")

        if math.isnan(med):
            med_cell = f"both >{cap}"
        elif math.isinf(statistics.median(x for s in seeds for x in by_seed[s][against])):
            med_cell = f"< {med:.2f} ({against}'s median >{cap})"  # the ratio is below method's median / (cap + 1)
        else:
            med_cell = f"{f2(med)} [{f2(bd[50])}, {f2(bd[949])}]"
        lines.append(
            f"| {f} | {n} | {mean:.2f} [{bm[50]:.2f}, {bm[949]:.2f}] | "
            + med_cell
            + (f" | {ratios(solved, part)[0]:.2f} [{sm[50]:.2f}, {sm[949]:.2f}]" if part else " | -")
            + f" ({len(lands & reached)} of {len(lands)}) |"
        )
    return "\n".join(lines)


def cmd_table(a: argparse.Namespace) -> int:
    docs = [jsonio.load(f) for f in a.files]
    runs = [r for d in docs for r in d["runs"] if r["family"] not in a.exclude]
    empty = sorted({f"{r['space']}/{r['variant']}" for r in runs if not r["optimum"]})
    if empty:  # no feasible point: nothing to find, every method "never" gets there
        runs = [r for r in runs if r["optimum"]]
        print(f"Left out, no feasible point: {', '.join(empty)}.")
    cap = min(d["launches"] for d in docs)
    print(table(runs, cap, judge_only=a.judge))
    print("\n**Each rule's gain on the judge families** (paired with `autotune` by landscape, noise and seed)\n")
    print(rule_gains(runs, cap))
    for m in a.pair:
        print(f"\n**{m} against the searcher, per family** (paired by landscape, noise and seed)\n")
        print(family_pairs(runs, cap, m))
    for m in a.goal:
        for noise in sorted({r["noise"] for r in runs if r["method"] == m}):
            print(f"\n**Goal check: {m} against {a.goal_against} at {noise:.0%} noise**\n")
            print(goal_table(runs, cap, m, noise, a.goal_against))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.search.family_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    r.add_argument("--spaces", nargs="+", default=list(SPACES), choices=SPACES)
    r.add_argument("--instances", type=int, default=1, help="landscapes drawn per family and space")
    r.add_argument("--first-instance", type=int, default=0)
    r.add_argument("--seeds", type=int, default=6)
    r.add_argument("--first-seed", type=int, default=0)
    r.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.04, 0.1])
    r.add_argument("--launches", type=int, default=40)
    r.add_argument("--methods", nargs="+", default=["autotune", "pipeline-random", "grid"], choices=[*METHODS, "grid"])
    r.add_argument(
        "--headline",
        nargs="+",
        default=["autotune", "pipeline-random", "grid"],
        help="methods run at every noise level; the others only at --ablation-noise",
    )
    r.add_argument("--ablation-noise", type=float, nargs="+", default=[0.04])
    r.add_argument(
        "--finalists",
        type=int,
        nargs=2,
        default=[0, 0],
        metavar=("COUNT", "ROUNDS"),
        help="after the launches, the study's finalist stage (the top COUNT configs and the study's baseline "
        "relaunched ROUNDS times each): its "
        "export's true value is the run's finalist_ratio (the search itself is the same)",
    )
    r.add_argument("--autotune-as", default="", help="name the searcher's runs so (e.g. after a change)")
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("table")
    t.add_argument("files", nargs="+")
    t.add_argument("--judge", action="store_true", help=f"judge families only (not {', '.join(DESIGN_FAMILIES)})")
    t.add_argument("--exclude", nargs="*", default=[], choices=FAMILIES, help="families left out of every table")
    t.add_argument("--goal", nargs="*", default=["autotune"], help="methods checked against issue #29's goal")
    t.add_argument("--goal-against", default="pipeline-random", help="the method the goal's ratios divide by")
    t.add_argument("--pair", nargs="*", default=[], help="methods paired with the searcher family by family")
    t.set_defaults(func=cmd_table)
    a = ap.parse_args(argv)
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
