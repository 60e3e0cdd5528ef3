"""The study's objectives (``autotune.space.Objective``, checked) and the choice of the best trial (feasible, best
primary objective)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from autotune.export.errors import ExportError
from autotune.finalists.outcome import FinalistOutcome
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord

Direction = Literal["maximize", "minimize"]


@dataclass(frozen=True)
class BestChoice:
    """The best record, or None with the reason none qualifies."""

    record: TrialRecord | None
    objective: Objective
    value: float | None
    reason: str
    # How the winner was decided: "single_launch" (the best trial's own measurement), "model_estimate" (the best
    # estimate of a model of the study's launches, autotune.study.model_rank), or the finalist stage's
    # "separable" / "tie" / "single" / "incomplete" (see autotune.finalists.choice)
    method: str = "single_launch"


def check_objectives(objectives: Sequence[Objective]) -> tuple[Objective, ...]:
    """The study's objectives (primary first), checked; raises ExportError saying how to fix."""
    if not objectives:
        raise ExportError(
            "no objectives given: pass at least one, e.g. Objective('output_tok_per_s', 'max', 'maximize') "
            "(the study's StudySpec.objectives)"
        )
    for o in objectives:
        if not isinstance(o, Objective):
            raise ExportError(f"objective {o!r} is not an autotune.space.Objective (pass the study's objectives)")
        if o.direction not in ("maximize", "minimize"):
            raise ExportError(f"objective {o.key!r}: direction {o.direction!r} must be 'maximize' or 'minimize'")
    return tuple(objectives)


def parse_load_levels(load_levels: Sequence[int]) -> tuple[int, ...]:
    """Sorted distinct concurrencies; raises ExportError when empty or not positive integers."""
    if not load_levels:
        raise ExportError("no load levels given: pass the study's concurrencies, e.g. [1, 8, 32, 128]")
    bad = [c for c in load_levels if isinstance(c, bool) or not isinstance(c, int) or c < 1]
    if bad:
        raise ExportError(f"load levels must be positive integers (concurrencies); got {bad!r}")
    return tuple(sorted(set(load_levels)))


def objective_value(record: TrialRecord, objective: Objective) -> float | None:
    """The record's measured value of ``objective``; None where it has none. A failed or invalid trial's record holds
    the worst value as a stand-in for the sampler (``autotune.trial.score.failed_score``: 0, or 1e12 for a latency),
    which was never measured."""
    if record.outcome is not TrialOutcome.COMPLETE:
        return None
    value = record.objectives.get(objective.key)
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def select_best(
    records: Sequence[TrialRecord], objectives: Sequence[Objective], estimates: Mapping[int, float] | None = None
) -> BestChoice:
    """Best = feasible with the best primary objective; ties go to the earlier trial number.

    ``estimates`` (trial number -> a model's estimate of the primary objective, ``autotune.study.model_rank``): the
    feasible trial with the best estimate instead, among those it estimates; none given, or none of them feasible,
    ranks by the measured values."""
    primary = objectives[0]
    candidates = [
        (rec, value)
        for rec in sorted(records, key=lambda r: r.number)
        if rec.feasible
        and rec.outcome is TrialOutcome.COMPLETE
        and (value := objective_value(rec, primary)) is not None
    ]
    if not candidates:
        return BestChoice(record=None, objective=primary, value=None, reason=_why_none(records, primary))
    best, best_value = _first_best(candidates, primary)
    reason = f"feasible trial with the best {primary.key} ({primary.direction})"
    estimated = [(rec, estimates[rec.number]) for rec, _ in candidates if estimates and rec.number in estimates]
    if not estimated:
        return BestChoice(record=best, objective=primary, value=best_value, reason=reason)
    pick, guess = _first_best(estimated, primary)
    measured = objective_value(pick, primary)
    reason = (
        f"feasible trial with the best {primary.key} ({primary.direction}) as a model of the study's "
        f"{sum(r.outcome is not TrialOutcome.INVALID for r in records)} launches estimates it: {guess:,.1f} "
        f"(its launch measured {measured:,.1f}"
        + ("" if pick.number == best.number else f"; the best single launch, trial {best.number}, {best_value:,.1f}")
        + ")"
    )
    return BestChoice(record=pick, objective=primary, value=measured, reason=reason, method="model_estimate")


def _first_best(scored: list[tuple[TrialRecord, float]], primary: Objective) -> tuple[TrialRecord, float]:
    """The entry of ``scored`` with the best score; of equal ones, the first (``scored`` is in trial order)."""
    best, value = scored[0]
    for rec, v in scored[1:]:
        if primary.better(v, value):
            best, value = rec, v
    return best, value


def apply_finalists(choice: BestChoice, records: Sequence[TrialRecord], outcome: FinalistOutcome | None) -> BestChoice:
    """The finalist stage's winner replaces the single-launch best, with the decision as the reason."""
    if outcome is None or choice.record is None:
        return choice
    decision = outcome.decision
    if decision is None or decision.winner is None:
        note = outcome.note or (decision.summary if decision else "")
        return replace(choice, reason=f"{choice.reason}; {note}" if note else choice.reason)
    winner = next((r for r in records if r.number == decision.winner), None)
    if winner is None:
        return choice
    return BestChoice(
        record=winner,
        objective=choice.objective,
        value=objective_value(winner, choice.objective),
        reason=f"finalist stage: {decision.summary}",
        method=decision.method,
    )


def _why_none(records: Sequence[TrialRecord], primary: Objective) -> str:
    if not records:
        return "no trials were recorded"
    outcomes = Counter(r.outcome for r in records)
    parts = [f"no feasible trial among {len(records)}"]
    complete = [r for r in records if r.outcome is TrialOutcome.COMPLETE]
    feasible = [r for r in complete if r.feasible]
    if feasible:
        parts.append(f"{len(feasible)} feasible trial(s) have no finite value for {primary.key}")
    violated: Counter[str] = Counter()
    for rec in complete:
        if rec.feasible:
            continue
        for key, value in rec.constraints.items():
            if not (isinstance(value, (int, float)) and value <= 0):
                violated[key] += 1
    infeasible = len(complete) - len(feasible)
    if infeasible:
        detail = ", ".join(f"{k} in {n}" for k, n in violated.most_common()) or "no constraint values recorded"
        parts.append(f"{infeasible} completed but violated constraints ({detail})")
    failures = Counter(r.failure.value if r.failure else "unknown" for r in records if r.outcome is TrialOutcome.FAILED)
    if failures:
        detail = ", ".join(f"{k}: {n}" for k, n in failures.most_common())
        parts.append(f"{outcomes[TrialOutcome.FAILED]} failed ({detail})")
    if outcomes[TrialOutcome.INVALID]:
        parts.append(f"{outcomes[TrialOutcome.INVALID]} rejected as invalid before launch")
    return "; ".join(parts) + ". Relax the constraints, widen the search space, or run more trials."
