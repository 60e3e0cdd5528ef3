"""What to launch next: the proposer a searcher (``autotune.study.searcher``) asks for each new trial.

The searcher is Ray Tune's side (suggest, record, tell, the budget and the time box); the rules (``autotune.policy``)
decide a proposal's fate; the proposer turns the Optuna study's proposals into a launch. A different strategy is a
different ``Proposer`` handed to the searcher (its ``proposer`` argument, as the search benchmark's baseline does);
the searcher does not change. Where this one's launches go (``docs/search.md`` has the rules):

- A proposal is repaired first (the first rule that changes it), then set aside when a rule gives a reason (the
  study's own ``points_to_evaluate`` only by the rules that apply to seeds: repeats). Set-aside proposals end as FAIL
  trials with the user attribute ``skipped`` (the reason); samplers ignore them, so nothing is told twice.
- When the proposals find nothing, a finite space is searched point by point (the unmeasured point nearest the best
  one is launched); when no point of it is left to launch (``exhausted``), the rest of the budget launches measured
  points again (the proposal's own when it was measured feasibly, else the best), never a point set aside.
- A space too large to list has no point nearest the best to fall back on: there, after a few set-aside proposals an
  unmeasured neighbour of the last one is launched instead (one parameter changed), and a point set aside is still
  launched if nothing else can be found. On a space that can be listed the walk costs launches where the optimum is a
  narrow ridge (issue #29, round 29 of ``benchmarks/search/results/families.md``).
- Seed points the rules keep for last (``Rule.deferred``) are launched when only as many launches of the budget
  remain, or when the search is finishing (the driver's stopping rule).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Collection

import optuna

from autotune.core.dashboard_attrs import named_constraints
from autotune.core.failures import FailureKind
from autotune.policy.base import Params, Rules, Told, params_key
from autotune.space import StudySpec, suggest
from autotune.space.enumerate import finite_points, nearest_first
from autotune.space.neighbours import neighbour
from autotune.study.optuna_study import enqueued

MAX_DUPLICATE_ASKS = 25  # proposals set aside before one is launched anyway
NEIGHBOUR_AFTER = 3  # set-aside proposals before a neighbour of the last one is tried
NEIGHBOUR_TRIES = 64
ENUMERATE_LIMIT = 20_000  # a finite space of at most this many points is searched point by point once proposals fail


def _failure(trial: optuna.trial.FrozenTrial) -> FailureKind | None:
    """The failure kind a told trial carries (``optuna_study.tag_trial``), or None."""
    failure = trial.user_attrs.get("failure")
    return FailureKind(failure) if failure in {k.value for k in FailureKind} else None


def measured_trials(study: optuna.Study) -> list[tuple[Params, Told]]:
    """The study's launched and told points (a repeat answered from an earlier result left out) and what the sampler
    was told of each: what a resumed searcher restores."""
    return [
        (t.params, Told(t.number, list(t.values), named_constraints(t.constraints), _failure(t)))
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if "duplicate_of" not in t.user_attrs
    ]


class Proposer:
    """Proposes the next point to launch: Optuna's ``ask``, repaired and screened by the rules, with the walk, the
    listing and the deferred seed points (module docstring). It counts what it set aside and why."""

    def __init__(self, spec: StudySpec, study: optuna.Study, rules: Rules) -> None:
        self.spec = spec
        self.study = study
        self.rules = rules
        # Every launch costs minutes: a point already measured is answered from its result, not launched again.
        self.measured: dict[str, Told] = {params_key(p): told for p, told in measured_trials(study)}
        self.duplicates_skipped = 0
        self.screened_skipped = 0
        self.repaired = 0
        self.neighbours_launched = 0
        self.exhausted = ""  # set when no point of a finite space is left to launch (the reason, with the counts)
        self.relaunched = 0  # launches of measured points after that
        # seed points launched last (a capped seed whose lifted twin runs, one predicted not to fit), not yet launched
        queued = {
            params_key(t.params)
            for t in study.get_trials(deepcopy=False)
            if t.state is optuna.trial.TrialState.WAITING or "fixed_params" in t.system_attrs
        }
        self.deferred = [
            p for p in rules.deferred() if params_key(p) not in self.measured and params_key(p) not in queued
        ]
        self._rng = random.Random(spec.seed)

    def told(self, params: Params, told: Told) -> None:
        """A launched point's result, as the sampler was told it."""
        self.measured[params_key(params)] = told

    def propose(self, running: Collection[str], *, left: int, finishing: bool) -> tuple[optuna.Trial, Params]:
        """The trial to launch next and its parameters. ``running``: the keys (``params_key``) of the points running
        now; ``left``: launches left in the budget, this one included; ``finishing``: no further search trial is
        wanted, only the deferred seed points."""
        waiting = self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))
        if self.deferred and (finishing or (not waiting and left <= len(self.deferred))):
            for _ in waiting:  # finishing: the seed points still queued are not launched, only those kept for last
                trial = self.study.ask()
                self._skip(trial, params_key(suggest(self.spec, trial)), "the search stopped before its launch")
            return self._ask_fixed(self.deferred.pop(0))  # the user's own point, launched last (prescreen)
        last: Params = {}
        walk = not self.exhausted and self._space_points is None  # the walk only where the space cannot be listed
        # once the listing found nothing left, one proposal (the point to re-measure) and the listing itself suffice
        for attempt in range(1 if self.exhausted else MAX_DUPLICATE_ASKS):
            trial = self.study.ask()
            params = suggest(self.spec, trial)
            key = params_key(params)
            seeded = enqueued(self.study, trial)
            fixed = None if seeded else self.rules.repair(params)
            if fixed is not None:  # the proposal's other settings, with the cap and memory the top load needs
                params, key = fixed.params, params_key(fixed.params)
                reason = self.rules.set_aside(params, running)
                if reason is None:
                    self._skip(trial, key, fixed.reason)
                    trial, params = self._ask_fixed(params)
                    # a lifted cap may open a conditional parameter, which the sampler fills in: the whole point may
                    # then be one already measured (a resumed study's seeded sampler proposes its first points again)
                    key = params_key(params)
                    reason = self.rules.set_aside(params, running, seeded=True)
                    if reason is None:
                        self.repaired += 1
                        return trial, params
                self._skip(trial, key, f"{reason} ({fixed.reason})")
            else:
                reason = self.rules.set_aside(params, running, seeded=seeded)
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
            return self._ask_fixed(self._measured_like(last, running))
        return self._ask_fixed(last)  # a space too large to list: launch the last proposal, set aside or not

    def _best_params(self, running: Collection[str] = ()) -> Params | None:
        """The measured point the export would pick now (feasible, best first objective), or None; one running now
        (``running``) is left out."""
        sign = 1.0 if self.spec.objectives[0].direction == "maximize" else -1.0
        best: tuple[float, str] | None = None
        for key, r in self.measured.items():
            if r.feasible and key not in running and (best is None or sign * r.values[0] > best[0]):
                best = (sign * r.values[0], key)
        return json.loads(best[1]) if best else None

    def _measured_like(self, params: Params, running: Collection[str]) -> Params:
        """A feasible measured point to launch again for ``params``: itself when it was measured feasibly, else the best
        point so far; a point set aside before launch or one that failed or broke a constraint is not launched again,
        and one running now (``running``) not beside itself while another feasible point is free."""
        key = params_key(params)
        done = self.measured.get(key)
        if done is not None and done.feasible and key not in running:
            return params
        return self._best_params(running) or self._best_params() or params

    @functools.cached_property
    def _space_points(self) -> list[Params] | None:
        """Every point of the space when it is finite and small enough to list (listed when first needed), else None."""
        return finite_points(self.spec, ENUMERATE_LIMIT)

    def _unlisted(self, near: Params, running: Collection[str]) -> Params | None:
        """The unmeasured point of a finite space nearest ``near`` that passes the screen, or None (``exhausted``
        then says why, when the space could be listed)."""
        points = self._space_points
        if points is None:
            return None
        why: dict[str, int] = {}
        for point in nearest_first(self.spec, points, near, self._rng):
            cand = self._repaired(point)
            reason = self.rules.set_aside(cand, running)
            if reason is None:
                return cand
            kind = "measured or running" if reason.startswith("repeats") else "set aside before launch"
            why[kind] = why.get(kind, 0) + 1
        if self.rules.relax():  # a rule that sets aside what is left stands down, and the listing is searched again
            return self._unlisted(near, running)
        detail = ", ".join(f"{n} {kind}" for kind, n in why.items())
        self.exhausted = f"search space exhausted: none of its {len(points)} points is left to launch ({detail})"
        return None

    def _ask_fixed(self, params: Params) -> tuple[optuna.Trial, Params]:
        self.study.enqueue_trial(params)
        trial = self.study.ask()
        return trial, suggest(self.spec, trial)

    def _neighbour(self, params: Params, running: Collection[str]) -> Params | None:
        """An unmeasured point near ``params`` that passes the screen, or None: a random walk of one-parameter steps
        from ``params`` (restarting from it every few steps) that stops at the first such point."""
        cand: Params | None = params
        for step in range(NEIGHBOUR_TRIES):
            cand = neighbour(self.spec, params if step % 8 == 0 or cand is None else cand, self._rng)
            if cand is None:
                return None
            cand = self._repaired(cand)
            if self.rules.set_aside(cand, running) is None:
                return cand
        return None

    def _repaired(self, params: Params) -> Params:
        fixed = self.rules.repair(params)
        return fixed.params if fixed is not None else params

    def _skip(self, trial: optuna.Trial, key: str, reason: str) -> None:
        """End a proposal without a launch; samplers ignore FAIL trials, so nothing is told twice."""
        trial.set_user_attr("skipped", reason)
        done = self.measured.get(key)
        if done is not None:
            trial.set_user_attr("duplicate_of", done.number)
        elif reason == "repeats a running trial":
            trial.set_user_attr("duplicate_of", "a running trial")
        if not reason.startswith("repaired: "):
            if key in self.measured or reason == "repeats a running trial":
                self.duplicates_skipped += 1
            else:
                self.screened_skipped += 1
        self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
