"""A Ray Tune ``Searcher`` that drives an Optuna study with ask/tell.

Why not Ray's stock ``OptunaSearch``: it only tells values. Here (1) the space is define-by-run with conditional
parameters, (2) the study lives in an RDB storage (SQLite under ``results/<study>/``) so a killed driver resumes,
(3) every outcome is recorded durably BEFORE the sampler is told, and (4) failed and invalid trials are told as
infeasible through Optuna's constraints (``Trial.set_constraint``, ``<= 0`` feasible; the samplers read them), so the
sampler learns the region instead of ignoring it. The study's side (sampler, seeds, how a record is told, ``reconcile``)
is ``autotune.study.optuna_study``.

This module is Ray Tune's side of the search: the budget, the time box, the stops, and each finished trial's record.
What to launch is the proposer's (``autotune.study.model_proposer``: TPE and a model of the measurements taking turns,
on ``autotune.study.proposer``'s Optuna ``ask``, walk, listing and seed points kept for last) and the rules' it
consults (``autotune.policy``: each a ``Rule``, listed in order by ``autotune.policy.defaults``). The searcher holds
both and adds no rule of its own: a rule is added or removed in that list, and another proposal strategy is another
``Proposer``. A finished trial's record is taken from the study's inbox
(``autotune.trial.inbox``: Ray Tune carries only the metrics it shows and a reference), stored durably, observed by
every rule, then told to the sampler and the proposer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import optuna
from ray.tune.search import Searcher

from autotune.policy.base import Rules, Told, params_key
from autotune.policy.defaults import default_rules
from autotune.space import StudySpec
from autotune.study.model_proposer import ModelProposer
from autotune.study.optuna_study import constraint_values, objective_values, tag_trial
from autotune.study.proposer import Proposer, measured_trials
from autotune.trial.inbox import RECORD_REF, Inbox, LocalInbox
from autotune.trial.records import TrialRecord

# What Ray Tune's Searcher.suggest returns: a config, None (nothing now, ask again later), or the string
# Searcher.FINISHED (no further trial). Ray annotates it Optional[Dict] and handles all three (ray/tune/search).
Suggestion: TypeAlias = dict[str, Any] | str | None
# How a searcher makes its proposer: ``ModelProposer``, ``Proposer`` itself, or another strategy with its constructor.
MakeProposer: TypeAlias = Callable[[StudySpec, optuna.Study, Rules], Proposer]


class OptunaStudySearcher(Searcher):
    """Suggests ``{"params": {...}, "number": n}`` configs; records then tells each finished trial."""

    def __init__(
        self,
        spec: StudySpec,
        study: optuna.Study,
        *,
        budget: int,
        on_record: Callable[[TrialRecord, str], None],
        make_missing_record: Callable[[int, str, dict[str, Any], str], TrialRecord],
        stop_after_s: float | None = None,
        on_raw_result: Callable[[int, str, str], str] | None = None,
        rules: Rules | None = None,
        proposer: MakeProposer = ModelProposer,
        inbox: Inbox | None = None,
        reserve_s: Callable[[], float] | None = None,
        records: Sequence[TrialRecord] = (),
    ) -> None:
        first = spec.objectives[0]
        super().__init__(metric="objective0", mode="max" if first.direction == "maximize" else "min")
        self.spec = spec
        self.study = study
        self.budget = budget
        self.suggested = 0
        self.on_record = on_record
        self.make_missing_record = make_missing_record
        self.on_raw_result = on_raw_result or (lambda number, trial_id, text: "no file (no store was given)")
        # where a finished trial's record waits (autotune.trial.inbox): the driver's inbox actor, or one in this process
        self.inbox: Inbox = inbox if inbox is not None else LocalInbox()
        self._live: dict[str, tuple[optuna.Trial, dict[str, Any]]] = {}
        # After this many seconds no new trial starts; running ones finish (a time box, e.g. a 10-minute GPU lease).
        self.deadline = time.monotonic() + stop_after_s if stop_after_s else None
        # seconds kept back from that time box for what follows the search (the finalist stage), re-estimated as
        # trials finish; the baseline is enqueued first, so it is launched before any time box can end the search
        self.reserve_s = reserve_s or (lambda: 0.0)
        # What decides a proposal's fate (autotune.policy.defaults: repeats, what the study's results ruled out, the
        # repair, the stop on a rejected flag, the seeds kept for last); each learns from the finished trials, on
        # resume from their stored records (``records``: a broken drafter, the KV cache a launch allocated), else from
        # what the Optuna study holds.
        self.rules = rules if rules is not None else default_rules(spec)
        stored = {r.number: r for r in records}
        for params, told in measured_trials(study):
            record = stored.get(told.number)
            if record is not None:
                self.rules.observe(params, record, told)
            else:
                self.rules.restore(params, told)
        self.proposer = proposer(spec, study, self.rules)  # what to launch next (it restores what was measured)
        self.stop_reason = ""  # set when every further trial would fail the same way
        self.timed_out = False  # the stop_after_s time box ended the study before its budget
        self.halted = False  # set by the driver on an interrupt or a lost cluster: no new trial starts
        # set by the driver when the Ray cluster is lost: a trial that ends without a result then is an infrastructure
        # casualty, not an outcome of its configuration, so it is neither recorded nor told (it reruns on resume)
        self.infrastructure_lost = False
        self.finished_reason = ""  # set by finish(): the study has what it needs (not an error)

    def finish(self, reason: str) -> None:
        """Start no further search trial (the driver's stopping rule, autotune.policy.stopping); running trials finish.
        Seed points kept for last (the ``defer`` rule, ``autotune.policy.defer``) are still launched before the search
        reports FINISHED."""
        self.finished_reason = reason

    def suggest(self, trial_id: str) -> Suggestion:
        if self.stop_reason or self.halted or (self.finished_reason and not self.proposer.deferred):
            return Searcher.FINISHED
        if self.suggested >= self.budget:
            return Searcher.FINISHED
        if self.deadline is not None and time.monotonic() + self.reserve_s() > self.deadline:
            self.timed_out = True
            return Searcher.FINISHED
        running = {params_key(p) for _, p in self._live.values()}
        trial, params = self.proposer.propose(
            running, left=self.budget - self.suggested, finishing=bool(self.finished_reason)
        )
        self._live[trial_id] = (trial, params)
        self.suggested += 1
        return {"params": params, "number": trial.number}

    def __getstate__(self) -> dict[str, Any]:
        """What Tune pickles into its folder (tuner.pkl): the spec with its secret values redacted, and without the
        driver's callbacks (any callable: a bound method carries its owner, and the owner the spec), the rules and the
        proposer (they would carry the spec along), the record inbox (an actor handle) and the Optuna study (it lives in
        its storage; NSGA-II's sampler holds a thread lock, which does not pickle). autotune never restores it from there."""
        state = self.__dict__.copy()
        state["spec"] = self.spec.redacted()
        state["rules"] = state["proposer"] = state["inbox"] = state["study"] = None
        for name, value in state.items():
            if callable(value) and not isinstance(value, type):
                state[name] = None
        return state

    # The study's state lives in its Optuna storage; Tune's searcher checkpoints have nothing to add.
    def save(self, checkpoint_path: str) -> None:
        return None

    def restore(self, checkpoint_path: str) -> None:
        return None

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        live = self._live.pop(trial_id, None)
        if live is None:
            return
        trial, params = live
        log_text = ""
        ref = result.get(RECORD_REF) if result else None  # Tune carries the metrics it shows and this reference
        delivery = self.inbox.take(str(ref)) if ref is not None else None
        if self.infrastructure_lost and delivery is None:
            return  # left RUNNING in Optuna: the resume fails it there (no values, nothing learnt) and reruns it
        if delivery is not None:
            try:
                record = TrialRecord.from_json(delivery.record)
                log_text = delivery.log_text
            except (ValueError, TypeError, KeyError) as exc:  # e.g. workers running another autotune version
                kept = self.on_raw_result(trial.number, trial_id, json.dumps(delivery.record, default=str))
                record = self.make_missing_record(
                    trial.number,
                    trial_id,
                    params,
                    f"the trial's record could not be read ({type(exc).__name__}: {exc}); the raw record is kept in "
                    f"{kept}. Do the driver and the workers run the same autotune version?",
                )
        else:
            if ref is not None:
                reason = f"the trial reported its record ({RECORD_REF} {ref}) but it did not reach the driver"
            elif error:
                reason = "the trial function raised (see the Ray Tune log)"
            else:
                reason = "the trial reported no result"
            record = self.make_missing_record(trial.number, trial_id, params, reason)
        self.on_record(record, log_text)  # durable first
        self.stop_reason = self.rules.stop(record) or self.stop_reason
        tag_trial(trial, self.spec, record)
        values = objective_values(self.spec, record)
        told = Told(trial.number, values, constraint_values(self.spec, record), record.failure)
        self.rules.observe(params, record, told)
        self.study.tell(trial, values)
        self.proposer.told(params, told)
