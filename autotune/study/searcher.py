"""A Ray Tune ``Searcher`` that drives an Optuna study with ask/tell.

Why not Ray's stock ``OptunaSearch``: it only tells values. Here (1) the space is define-by-run with conditional
parameters, (2) the study lives in an RDB storage (SQLite under ``results/<study>/``) so a killed driver resumes,
(3) every outcome is recorded durably BEFORE the sampler is told, and (4) failed and invalid trials are told as
infeasible through Optuna's constraints (``Trial.set_constraint``, ``<= 0`` feasible; the samplers read them), so the
sampler learns the region instead of ignoring it. The study's side (sampler, seeds, how a record is told, ``reconcile``)
is ``autotune.study.optuna_study``; this module decides what to launch next.

Where launches go (``docs/search.md`` has the benchmark behind each rule):
- A proposal that repeats a measured or running point is not launched and not told again (copies of one result would
  fill TPE's "good" group with one point and keep it proposing that point); after a few such proposals the searcher
  launches an unmeasured neighbour of the proposal instead (one parameter changed).
- A proposal the study's own results rule out (``autotune.policy.learned``), or one a ``screen`` passed in rules out, is
  set aside the same way; it is still launched if nothing else can be found. The study's own ``points_to_evaluate``
  are never set aside.
- Set-aside proposals end as FAIL trials with the user attribute ``skipped`` (the reason); samplers ignore them.
- When the proposals and the walk find nothing, a finite space is searched point by point (the unmeasured point
  nearest the best one is launched); when no point of it is left to launch (``exhausted``), the rest of the budget
  launches measured points again (the proposal's own when it was measured feasibly, else the best), never a point
  set aside.
"""

from __future__ import annotations

import functools
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from ray.tune.search import Searcher

from autotune.core.dashboard_attrs import named_constraints
from autotune.core.failures import FailureKind
from autotune.policy.kvmodel import KvModel
from autotune.policy.learned import Learned
from autotune.policy.repair import Repaired, Repairer
from autotune.space import StudySpec, suggest
from autotune.space.enumerate import finite_points, nearest_first
from autotune.space.neighbours import neighbour
from autotune.study.optuna_study import constraint_values, objective_values, tag_trial
from autotune.trial.records import TrialRecord

MAX_DUPLICATE_ASKS = 25  # proposals set aside before one is launched anyway
NEIGHBOUR_AFTER = 3  # set-aside proposals before a neighbour of the last one is tried
NEIGHBOUR_TRIES = 64
ENUMERATE_LIMIT = 20_000  # a finite space of at most this many points is searched point by point once proposals fail


@dataclass(frozen=True)
class _Result:
    """What the sampler was told for a measured point, to answer a repeat of it without a launch."""

    number: int
    values: list[float]
    constraints: dict[str, float]

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())


def params_key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


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
        screen: Callable[[dict[str, Any]], str | None] | None = None,
        repair: Callable[[dict[str, Any]], Repaired | None] | None = None,
        reserve_s: Callable[[], float] | None = None,
    ) -> None:
        first = spec.objectives[0]
        super().__init__(metric="objective0", mode="max" if first.direction == "maximize" else "min")
        self.spec = spec
        self.study = study
        self.budget = budget
        self.suggested = 0
        self.on_record = on_record
        self.make_missing_record = make_missing_record
        self.on_raw_result = on_raw_result or (lambda number, trial_id, text: "the Ray Tune results")
        self._live: dict[str, tuple[optuna.Trial, dict[str, Any]]] = {}
        # After this many seconds no new trial starts; running ones finish (a time box, e.g. a 10-minute GPU lease).
        self.deadline = time.monotonic() + stop_after_s if stop_after_s else None
        # seconds kept back from that time box for what follows the search (the finalist stage), re-estimated as
        # trials finish; the baseline is enqueued first, so it is launched before any time box can end the search
        self.reserve_s = reserve_s or (lambda: 0.0)
        # Every launch costs minutes: a point already measured is answered from its result, not launched again.
        self._finished: dict[str, _Result] = {
            params_key(t.params): _Result(t.number, list(t.values), named_constraints(t.constraints))
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "duplicate_of" not in t.user_attrs
        }
        self.duplicates_skipped = 0
        self.screened_skipped = 0
        self.repaired = 0
        self.neighbours_launched = 0
        self.learned = Learned(spec)
        # Why a point is not worth its launch (None: launch it): none by default (a pre-launch screen of the cap and GPU
        # memory gained nothing on issue #29's landscape families, docs/decisions/0011-round-4-issue-29.md); tests and
        # benchmarks pass their own. The repair gives a proposal the cap and KV cache the top load needs
        # (autotune.policy.repair).
        from autotune.policy.prescreen import study_sizes, top_level

        sizes = study_sizes(spec) if repair is None else None
        self.screen = screen if screen is not None else (lambda params: None)
        self.kv = KvModel(spec, sizes)  # the KV cache a launch allocates, learnt from the study's launches
        repairer = Repairer(spec, top_level(spec), sizes, kv=self.kv)
        self._repairer = repairer
        # seed points launched last (a capped seed whose lifted twin runs, one predicted not to fit), not yet launched:
        # launched when only as many launches of the budget remain, or when the stopping rule ends the search
        from autotune.policy.prescreen import deferred_seeds

        queued = {
            params_key(t.params)
            for t in study.get_trials(deepcopy=False)
            if t.state is optuna.trial.TrialState.WAITING or "fixed_params" in t.system_attrs
        }
        self._deferred = [
            p
            for p in deferred_seeds(spec, sizes)
            if params_key(p) not in self._finished and params_key(p) not in queued
        ]
        self.repair = repair if repair is not None else repairer.repair
        self._rng = random.Random(spec.seed)
        self.stop_reason = ""  # set when every further trial would fail the same way
        self.timed_out = False  # the stop_after_s time box ended the study before its budget
        self.halted = False  # set by the driver on an interrupt or a lost cluster: no new trial starts
        # set by the driver when the Ray cluster is lost: a trial that ends without a result then is an infrastructure
        # casualty, not an outcome of its configuration, so it is neither recorded nor told (it reruns on resume)
        self.infrastructure_lost = False
        self.finished_reason = ""  # set by finish(): the study has what it needs (not an error)
        self.exhausted = ""  # set when no point of a finite space is left to launch (the reason, with the counts)
        self.relaunched = 0  # launches of measured points after that

    def always_passed_flags(self) -> set[str]:
        """Flags every trial passes: fixed ``server.flags`` and parameters without a condition."""
        flags = set(self.spec.server.flags)
        flags.update(p.flag for p in self.spec.params if p.flag and not p.when)
        return flags

    def fixed_flags(self) -> set[str]:
        """Flags passed with the same value by every trial: the study's fixed ``server.flags``."""
        return set(self.spec.server.flags)

    def _check_every_trial_fails(self, record: TrialRecord) -> None:
        """Stop the study when the engine rejected something every trial passes the same way.

        An unknown flag name fails every trial that passes the flag: fixed flags and unconditional parameters. A
        rejected value fails every trial only when the value is fixed; a sampled value's one bad choice does not."""
        if record.failure is FailureKind.UNKNOWN_FLAG:
            candidates, what = self.always_passed_flags(), "which every trial passes"
        elif record.failure is FailureKind.INVALID_VALUE:
            candidates, what = self.fixed_flags(), "a value fixed in server.flags that every trial passes"
        else:
            return
        named = sorted(candidates & set(record.rejected_flags))  # the flags the engine named, as the record holds them
        if named:
            self.stop_reason = (
                f"stopping the study: the installed engine rejects --{', --'.join(named)}, {what}, so every trial "
                f"would fail the same way. {record.message}"
            )

    def finish(self, reason: str) -> None:
        """Start no further search trial (the driver's stopping rule, autotune.policy.stopping); running trials finish. Seed
        points kept for last (``autotune.policy.prescreen.deferred_seeds``) are still launched before the search reports
        FINISHED."""
        self.finished_reason = reason

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        if self.stop_reason or self.halted or (self.finished_reason and not self._deferred):
            return Searcher.FINISHED  # type: ignore[return-value]  # Ray Tune's Searcher.suggest returns the FINISHED string sentinel outside its annotation
        if self.suggested >= self.budget:
            return Searcher.FINISHED  # type: ignore[return-value]  # Ray Tune's Searcher.suggest returns the FINISHED string sentinel outside its annotation
        if self.deadline is not None and time.monotonic() + self.reserve_s() > self.deadline:
            self.timed_out = True
            return Searcher.FINISHED  # type: ignore[return-value]  # Ray Tune's Searcher.suggest returns the FINISHED string sentinel outside its annotation
        trial, params = self._propose({params_key(p) for _, p in self._live.values()})
        self._live[trial_id] = (trial, params)
        self.suggested += 1
        return {"params": params, "number": trial.number}

    def _set_aside(self, key: str, params: dict[str, Any], running: set[str], seeded: bool) -> str | None:
        """Why a proposal is not launched now (None: launch it)."""
        if key in self._finished:
            return f"repeats trial {self._finished[key].number}"
        if key in running:
            return "repeats a running trial"
        if seeded:  # the study's own points_to_evaluate
            return None
        return self.screen(params) or self.learned.reason(params)

    def _best_params(self) -> dict[str, Any] | None:
        """The measured point the export would pick now (feasible, best first objective), or None."""
        sign = 1.0 if self.spec.objectives[0].direction == "maximize" else -1.0
        best: tuple[float, str] | None = None
        for key, r in self._finished.items():
            if r.feasible and (best is None or sign * r.values[0] > best[0]):
                best = (sign * r.values[0], key)
        return json.loads(best[1]) if best else None

    def _propose(self, running: set[str]) -> tuple[optuna.Trial, dict[str, Any]]:
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        if (
            self._deferred
            and not waiting
            and (self.finished_reason or self.budget - self.suggested <= len(self._deferred))
        ):
            return self._ask_fixed(self._deferred.pop(0))  # the user's own point, launched last (prescreen)
        last: dict[str, Any] = {}
        walk = not self.exhausted
        # once the listing found nothing left, one proposal (the point to re-measure) and the listing itself suffice
        for attempt in range(1 if self.exhausted else MAX_DUPLICATE_ASKS):
            trial = self.study.ask()
            params = suggest(self.spec, trial)
            key = params_key(params)
            seeded = "fixed_params" in self.study._storage.get_trial_system_attrs(trial._trial_id)
            fixed = None if seeded else self.repair(params)
            if fixed is not None:  # the proposal's other settings, with the cap and memory the top load needs
                params, key = fixed.params, params_key(fixed.params)
                reason = self._set_aside(key, params, running, False)
                if reason is None:
                    self._skip(trial, key, fixed.reason)
                    self.repaired += 1
                    return self._ask_fixed(params)
                self._skip(trial, key, f"{reason} ({fixed.reason})")
            else:
                reason = self._set_aside(key, params, running, seeded)
                if reason is None:
                    return trial, params
                self._skip(trial, key, reason)
            last = params
            if attempt + 1 >= NEIGHBOUR_AFTER and walk:
                alt = self._neighbour(params, running)
                if alt is not None:
                    self.neighbours_launched += 1
                    return self._ask_fixed(alt)
                walk = False  # the points near the proposals are used up; the next walk would fail the same way
        found = self._unlisted(self._best_params() or last, running)
        if found is not None:
            self.neighbours_launched += 1
            return self._ask_fixed(found)
        if self.exhausted:  # every point measured or set aside: the budget left re-measures measured points
            self.relaunched += 1
            return self._ask_fixed(self._measured_like(last))
        return self._ask_fixed(last)  # a space too large to list: launch the last proposal, set aside or not

    def _measured_like(self, params: dict[str, Any]) -> dict[str, Any]:
        """A feasible measured point to launch again for ``params``: itself when it was measured feasibly, else the best
        point so far; a point set aside before launch or one that failed or broke a constraint is not launched again."""
        done = self._finished.get(params_key(params))
        return params if done is not None and done.feasible else (self._best_params() or params)

    @functools.cached_property
    def _space_points(self) -> list[dict[str, Any]] | None:
        """Every point of the space when it is finite and small enough to list (listed when first needed), else None."""
        return finite_points(self.spec, ENUMERATE_LIMIT)

    def _unlisted(self, near: dict[str, Any], running: set[str]) -> dict[str, Any] | None:
        """The unmeasured point of a finite space nearest ``near`` that passes the screen, or None (``exhausted``
        then says why, when the space could be listed)."""
        points = self._space_points
        if points is None:
            return None
        why: dict[str, int] = {}
        for point in nearest_first(self.spec, points, near, self._rng):
            cand = self._repaired(point)
            reason = self._set_aside(params_key(cand), cand, running, False)
            if reason is None:
                return cand
            kind = "measured or running" if reason.startswith("repeats") else "set aside before launch"
            why[kind] = why.get(kind, 0) + 1
        detail = ", ".join(f"{n} {kind}" for kind, n in why.items())
        self.exhausted = f"search space exhausted: none of its {len(points)} points is left to launch ({detail})"
        return None

    def _ask_fixed(self, params: dict[str, Any]) -> tuple[optuna.Trial, dict[str, Any]]:
        self.study.enqueue_trial(params)
        trial = self.study.ask()
        return trial, suggest(self.spec, trial)

    def _neighbour(self, params: dict[str, Any], running: set[str]) -> dict[str, Any] | None:
        """An unmeasured point near ``params`` that passes the screen, or None: a random walk of one-parameter steps
        from ``params`` (restarting from it every few steps) that stops at the first such point."""
        cand: dict[str, Any] | None = params
        for step in range(NEIGHBOUR_TRIES):
            cand = neighbour(self.spec, params if step % 8 == 0 or cand is None else cand, self._rng)
            if cand is None:
                return None
            cand = self._repaired(cand)
            if self._set_aside(params_key(cand), cand, running, False) is None:
                return cand
        return None

    def _repaired(self, params: dict[str, Any]) -> dict[str, Any]:
        fixed = self.repair(params)
        return fixed.params if fixed is not None else params

    def _skip(self, trial: optuna.Trial, key: str, reason: str) -> None:
        """End a proposal without a launch; samplers ignore FAIL trials, so nothing is told twice."""
        trial.set_user_attr("skipped", reason)
        done = self._finished.get(key)
        if done is not None:
            trial.set_user_attr("duplicate_of", done.number)
        elif reason == "repeats a running trial":
            trial.set_user_attr("duplicate_of", "a running trial")
        if not reason.startswith("repaired: "):
            self._note_skip(key, reason)
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _note_skip(self, key: str, reason: str) -> None:
        if key in self._finished or reason == "repeats a running trial":
            self.duplicates_skipped += 1
        else:
            self.screened_skipped += 1

    def __getstate__(self) -> dict[str, Any]:
        """What Tune pickles into its folder (tuner.pkl): the spec with its secret values redacted, and without the
        driver's callbacks (any callable: a bound method carries its owner, and the owner the spec), the screen and the
        learned set-asides (they would carry the spec along). autotune never restores it from there."""
        state = self.__dict__.copy()
        state["spec"] = self.spec.redacted()
        for name in ("screen", "learned", "repair", "_repairer", "kv"):
            state[name] = None
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
        if self.infrastructure_lost and not (result and "record_json" in result):
            return  # left RUNNING in Optuna: the resume fails it there (no values, nothing learnt) and reruns it
        if result and "record_json" in result:
            try:
                record = TrialRecord.from_json(json.loads(result["record_json"]))
                log_text = str(result.get("log_text", ""))
            except (ValueError, TypeError, KeyError) as exc:  # e.g. workers running another autotune version
                kept = self.on_raw_result(trial.number, trial_id, str(result["record_json"]))
                record = self.make_missing_record(
                    trial.number,
                    trial_id,
                    params,
                    f"the trial's record could not be read ({type(exc).__name__}: {exc}); the raw record is kept in "
                    f"{kept}. Do the driver and the workers run the same autotune version?",
                )
        else:
            reason = "the trial function raised (see the Ray Tune log)" if error else "the trial reported no result"
            record = self.make_missing_record(trial.number, trial_id, params, reason)
        self.on_record(record, log_text)  # durable first
        self._check_every_trial_fails(record)
        tag_trial(trial, self.spec, record)
        values = objective_values(self.spec, record)
        self.learned.observe(params, record)
        self.kv.observe(params, record.phases.kv_cache_tokens)
        self._repairer.forget()  # the KV model may have changed
        self.study.tell(trial, values)
        self._finished[params_key(params)] = _Result(trial.number, values, constraint_values(self.spec, record))
