"""The searcher as it was before the search work of issue #14, kept to measure against (and, with Optuna's
RandomSampler, the benchmark's random sampling: the study file's seed points, then uniform draws, repeats skipped): a repeat of a measured point
is told to the sampler again as a copy of its result (up to 25 times, then measured again), no pre-launch screen, no
learned set-asides, the study's seed points only, TPE without constant liar."""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from ray.tune.search import Searcher

from autotune.policy.base import Rules
from autotune.space import StudySpec, suggest
from autotune.study.searcher import MAX_DUPLICATE_ASKS, OptunaStudySearcher, Suggestion, _Result, params_key


def open_baseline_study(spec: StudySpec) -> optuna.Study:
    """An in-memory study with the sampler as it was (TPE, or random) and only the study file's seed points."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler: optuna.samplers.BaseSampler = (
            optuna.samplers.RandomSampler(seed=spec.seed)
            if spec.sampler == "random"
            else optuna.samplers.TPESampler(seed=spec.seed, multivariate=True, group=True, n_startup_trials=5)
        )
    study = optuna.create_study(
        study_name=spec.name, sampler=sampler, directions=[o.direction for o in spec.objectives]
    )
    for point in spec.points_to_evaluate:
        study.enqueue_trial(dict(point), skip_if_exists=True)
    return study


class BaselineSearcher(OptunaStudySearcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, rules=Rules([]), **kwargs)  # no screen, no learned set-asides, no repair

    def suggest(self, trial_id: str) -> Suggestion:
        if self.suggested >= self.budget:
            return Searcher.FINISHED
        running = {params_key(p) for _, p in self._live.values()}
        for attempt in range(MAX_DUPLICATE_ASKS + 1):
            trial = self.study.ask()
            params = suggest(self.spec, trial)
            key = params_key(params)
            if attempt == MAX_DUPLICATE_ASKS:
                break
            if key in self._finished:
                self._tell_copy(trial, self._finished[key])
            elif key in running:
                trial.set_user_attr("duplicate_of", "a running trial")
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                break
            self.duplicates_skipped += 1
        self._live[trial_id] = (trial, params)
        self.suggested += 1
        return {"params": params, "number": trial.number}

    def _tell_copy(self, trial: optuna.Trial, done: _Result) -> None:
        for key, value in done.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("duplicate_of", done.number)
        self.study.tell(trial, done.values)
