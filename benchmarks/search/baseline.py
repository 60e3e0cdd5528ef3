"""The searcher as it was before the search work of issue #14, kept to measure against (and, with Optuna's
RandomSampler, the benchmark's random sampling: the study file's seed points, then uniform draws, repeats skipped): a repeat of a measured point
is told to the sampler again as a copy of its result (up to 25 times, then measured again), no pre-launch screen, no
learned set-asides, the study's seed points only, TPE without constant liar."""

from __future__ import annotations

import warnings
from collections.abc import Collection
from typing import Any

import optuna

from autotune.policy.base import Params, Rules, Told, params_key
from autotune.space import StudySpec, suggest
from autotune.study.proposer import MAX_DUPLICATE_ASKS, Proposer
from autotune.study.searcher import OptunaStudySearcher


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


class BaselineProposer(Proposer):
    """Optuna's proposal as it is; a repeat of a measured point is told again as a copy of its result."""

    def propose(self, running: Collection[str], *, left: int, finishing: bool) -> tuple[optuna.Trial, Params]:
        for attempt in range(MAX_DUPLICATE_ASKS + 1):
            trial = self.study.ask()
            params = suggest(self.spec, trial)
            key = params_key(params)
            if attempt == MAX_DUPLICATE_ASKS:
                break
            if key in self.measured:
                self._tell_copy(trial, self.measured[key])
            elif key in running:
                trial.set_user_attr("duplicate_of", "a running trial")
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                break
            self.duplicates_skipped += 1
        return trial, params

    def _tell_copy(self, trial: optuna.Trial, done: Told) -> None:
        for key, value in done.constraints.items():
            trial.set_constraint(key, value)
        trial.set_user_attr("duplicate_of", done.number)
        self.study.tell(trial, done.values)


class BaselineSearcher(OptunaStudySearcher):
    """The study's searcher with no rule (no screen, no learned set-asides, no repair) and the baseline's proposer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, rules=Rules([]), proposer=BaselineProposer, **kwargs)
