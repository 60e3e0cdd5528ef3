"""The Optuna study behind a search: its sampler and storage, the seed points it is opened with, and how a trial's
record is told to it (objective values, constraints ``<= 0`` feasible, the tags a trial carries), including after a
killed driver (``reconcile``). ``autotune.study.searcher`` proposes the points; this module owns the study's side.
Only Optuna's public API is used: a study keeps the storage it was opened on (``StoredStudy``), and a trial is reached by
number through the storage's public methods."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.storages import BaseStorage

from autotune.core.dashboard_attrs import mark_feasibility, name_objectives
from autotune.space import StudySpec
from autotune.trial.records import TrialOutcome, TrialRecord
from autotune.trial.score import FAILED_REQUESTS, failed_score, objective_key

LAUNCH_CONSTRAINT = "trial_failed"


def constraint_values(spec: StudySpec, record: TrialRecord) -> dict[str, float]:
    """``trial_failed`` (1 for a failed or invalid trial), ``failed_requests`` (requests failed at the judged levels) and
    one value per study constraint; same keys for every trial."""
    failed = 0.0 if record.outcome is TrialOutcome.COMPLETE else 1.0
    values = {LAUNCH_CONSTRAINT: failed, FAILED_REQUESTS: float(record.constraints.get(FAILED_REQUESTS, 0.0))}
    for c in spec.constraints:
        key = objective_key(c.metric, c.level)
        values[key] = float(record.constraints.get(key, 0.0 if not failed else 1e9))
    return values


def set_constraints(trial: optuna.Trial, spec: StudySpec, record: TrialRecord) -> None:
    values = constraint_values(spec, record)
    for key, value in values.items():
        trial.set_constraint(key, value)
    mark_feasibility(trial, values)


def objective_values(spec: StudySpec, record: TrialRecord) -> list[float]:
    fallback = failed_score(spec.objectives, spec.constraints).objectives
    return [
        float(record.objectives.get(objective_key(o.metric, o.level), fallback[objective_key(o.metric, o.level)]))
        for o in spec.objectives
    ]


def make_sampler(spec: StudySpec) -> optuna.samplers.BaseSampler:
    if spec.sampler == "random":
        return optuna.samplers.RandomSampler(seed=spec.seed)
    if spec.sampler == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=spec.seed)
    with warnings.catch_warnings():  # multivariate/group are "experimental" in Optuna, and what conditionals need
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # constant_liar: trials still running count as poor, so k slots asked at once do not get the same point
        return optuna.samplers.TPESampler(
            seed=spec.seed, multivariate=True, group=True, n_startup_trials=5, constant_liar=True
        )


class StoredStudy(optuna.Study):
    """An Optuna study with the storage it lives in as a public attribute (Optuna's ``Study`` keeps it private), so a
    trial can be reached by its number (``trial``) through the storage's public methods."""

    def __init__(self, study_name: str, storage: BaseStorage, sampler: optuna.samplers.BaseSampler) -> None:
        super().__init__(study_name=study_name, storage=storage, sampler=sampler)
        self.storage = storage

    def trial(self, number: int) -> optuna.trial.Trial:
        """A handle on trial ``number``, to set its attributes (KeyError: the study has no such trial)."""
        study_id = self.storage.get_study_id_from_name(self.study_name)
        return optuna.trial.Trial(self, self.storage.get_trial_id_from_study_id_trial_number(study_id, number))

    def find_trial(self, number: int | None) -> optuna.trial.Trial | None:
        """A handle on trial ``number``, or None when it is None or the study has no such trial."""
        if number is None or number not in {t.number for t in self.get_trials(deepcopy=False)}:
            return None
        return self.trial(number)


def open_study(spec: StudySpec, storage_url: str | None) -> StoredStudy:
    """The study in ``storage_url`` (created with its seed points when new), or in memory when it is None."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage: BaseStorage = (
        optuna.storages.InMemoryStorage() if storage_url is None else optuna.storages.RDBStorage(storage_url)
    )
    sampler = make_sampler(spec)
    optuna.create_study(
        study_name=spec.name,
        storage=storage,
        sampler=sampler,
        directions=[o.direction for o in spec.objectives],
        load_if_exists=True,
    )
    study = StoredStudy(spec.name, storage, sampler)
    name_objectives(study, [objective_key(o.metric, o.level) for o in spec.objectives])
    if not study.trials:
        from autotune.policy.prescreen import seeds_now, study_sizes

        for point in seeds_now(spec, study_sizes(spec)):  # the searcher launches the deferred seeds last
            study.enqueue_trial(point, skip_if_exists=True)
    return study


def tag_trial(trial: optuna.Trial, spec: StudySpec, record: TrialRecord) -> None:
    """What an Optuna trial carries of its record before it is told: constraints, outcome, failure kind, trial id."""
    set_constraints(trial, spec, record)
    trial.set_user_attr("outcome", record.outcome.value)
    if record.failure is not None:
        trial.set_user_attr("failure", record.failure.value)
    trial.set_user_attr("trial_id", record.trial_id)


def enqueued(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Whether a trial just asked was taken from the study's queue (``enqueue_trial``: a seed point or a point the
    searcher chose) rather than proposed by the sampler."""
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    return any(t.number == trial.number and "fixed_params" in t.system_attrs for t in running)


def reconcile(study: StoredStudy, spec: StudySpec, records: Sequence[TrialRecord]) -> int:
    """After a killed or interrupted driver: tell trials whose record was written but not told; fail the rest that were
    running and queue their points again, so each runs on resume (a seed point, the baseline first of all, is
    enqueued only when a study opens empty: failed alone, it would never be measured)."""
    recorded = {r.number: r for r in records}
    again: list[dict[str, Any]] = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        rec = recorded.get(t.number)
        if rec is not None:
            tag_trial(study.trial(t.number), spec, rec)
            study.tell(t.number, objective_values(spec, rec))
        else:
            study.tell(t.number, state=optuna.trial.TrialState.FAIL)
            if t.params:
                again.append(dict(t.params))
    if again:  # before the points still queued, which were to run after them (Optuna's queue runs by trial number)
        for waiting in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)):
            again.append(dict(waiting.system_attrs.get("fixed_params", {})))
            queued = study.ask()  # takes the first waiting trial off the queue
            queued.set_user_attr("skipped", "queued again behind the trials an interrupted run left unfinished")
            study.tell(queued, state=optuna.trial.TrialState.FAIL)
        for point in again:
            study.enqueue_trial(point)
    return len(recorded)
