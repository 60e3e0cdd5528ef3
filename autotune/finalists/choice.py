"""The finalist stage, pure parts: which configs are finalists, in what order they are relaunched, and how the winner
is decided from the relaunches.

A study's ranking from single launches is noisy (one launch of a config can differ from the next by as much as configs
differ from each other). Before export, the top ``count`` feasible configs are launched again ``rounds`` times each, in
interleaved order (A B C A B C: a slow period of the machine hits every finalist alike), and each relaunch is measured
like a trial. A relaunch is a ``FinalistRun``: a full ``TrialRecord`` plus the stage, the round and the trial it
repeats. Runs are stored apart from the trials (``finalists.jsonl``) and never told to the sampler.

The decision uses the primary objective of each clean relaunch (complete and feasible) as one observation per launch,
so launch-to-launch variation counts; the original trial's own measurement is left out (it was chosen for being high,
so it is biased upwards). The leader is the finalist with the best mean. A runner-up is *separable* from the leader when
Welch's t test on the two sets of launches gives p < ``alpha``; where both sets repeat one figure (a deterministic
simulator relaunches bit for bit), there is no launch-to-launch spread to test with, and the runner-up is separable only
where the difference is larger than the relaunches' measurement-window intervals (never with none: a spread of zero
would make +0.001% separable). If every other finalist is separable, the leader wins
(``method="separable"``). Otherwise the leader and the finalists not separable from it *tie*; among them the winner is
the one with the lowest mean TTFT p99 at the objective's level where that difference is itself separable, else the
leader (its relaunch mean is still the best estimate; the tie is stated); the lowest ``--mem-fraction-static`` and then
the lowest trial number break only exactly equal means (``method="tie"``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from autotune.bench.stats import interval, welch
from autotune.finalists.outcome import (
    Comparison,
    Decision,
    Direction,
    FinalistOutcome,
    FinalistRun,
    FinalistStats,
    StagePlan,
    baseline_number,
)
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord
from autotune.verify.compare import across_launches, launch_spread


def run_trial_id(trial_id: str, stage: int, round_: int) -> str:
    return f"{trial_id}-f{stage}r{round_}"


def _better(direction: Direction, a: float, b: float) -> bool:
    return a > b if direction == "maximize" else a < b


def _value(record: TrialRecord, key: str) -> float | None:
    v = record.objectives.get(key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def _config(record: TrialRecord) -> str:
    """What identifies a config: its params (a re-measured point is another trial of the same config)."""
    return json.dumps(record.params, sort_keys=True, default=str)


def select_finalists(records: Sequence[TrialRecord], key: str, direction: Direction, count: int) -> tuple[int, ...]:
    """Trial numbers of the top ``count`` configs among the complete, feasible trials by objective ``key`` (ties: lower
    number first); a config measured more than once is one finalist, its best trial."""
    if count <= 0:
        return ()
    scored = [
        (r, v)
        for r in records
        if r.outcome is TrialOutcome.COMPLETE and r.feasible and (v := _value(r, key)) is not None
    ]
    sign = -1.0 if direction == "maximize" else 1.0
    scored.sort(key=lambda rv: (sign * rv[1], rv[0].number))
    best: dict[str, int] = {}
    for r, _ in scored:
        best.setdefault(_config(r), r.number)
    return tuple(best.values())[:count]


def stage_finalists(
    records: Sequence[TrialRecord],
    key: str,
    direction: Direction,
    count: int,
    baseline: Mapping[str, Any] | None = None,
) -> tuple[int, ...]:
    """The configs a finalist stage relaunches: the top ``count`` feasible ones (``select_finalists``), then the
    study's baseline when it completed and is not among them, so the verdict against the user's configuration rests on
    relaunches as the winner's does. A baseline that missed a constraint is relaunched too (its figures are what the
    gain is measured from) but cannot win, even where its relaunches meet the constraints (``decide``)."""
    leaders = select_finalists(records, key, direction, count)
    base = baseline_number(records, baseline)
    if not leaders or base is None or base in leaders:
        return leaders
    rec = next(r for r in records if r.number == base)
    if rec.outcome is not TrialOutcome.COMPLETE or _value(rec, key) is None:
        return leaders
    twin = next((r.number for r in records if r.number in leaders and _config(r) == _config(rec)), None)
    if twin is not None:  # the baseline's config leads under a re-measure's number: relaunched once, as the baseline
        return tuple(base if n == twin and rec.feasible else n for n in leaders)
    return (*leaders, base)


def next_stage(
    plans: Sequence[StagePlan], runs: Sequence[FinalistRun], finalists: tuple[int, ...], rounds: int, *, new_round: bool
) -> StagePlan | None:
    """The stage to run now, or None when nothing is due.

    The latest stage is resumed when it has the same finalists and rounds and misses runs (a killed driver). Otherwise a
    normal study run starts a stage only when none with these finalists exists yet; ``new_round`` (``--finalists-only``)
    always starts a new one after a complete stage, keeping the old ones."""
    if not finalists:
        return None
    latest = max(plans, key=lambda p: p.stage) if plans else None
    if latest is not None and latest.finalists == finalists and latest.rounds == rounds:
        if missing_slots(latest, runs):
            return latest
        if not new_round:
            return None
    elif not new_round and any(p.finalists == finalists for p in plans):
        return None
    return StagePlan(stage=(latest.stage + 1) if latest else 1, finalists=finalists, rounds=rounds)


def missing_slots(plan: StagePlan, runs: Sequence[FinalistRun]) -> list[tuple[int, int]]:
    """The ``(round, trial number)`` slots of ``plan`` that have no stored run yet, in launch order."""
    done = {r.key for r in runs}
    return [(rnd, n) for rnd, n in plan.slots() if (plan.stage, rnd, n) not in done]


# ------------------------------------------------------------------------------------------------------- decision


def _mem_fraction(record: TrialRecord) -> float | None:
    value: Any = record.flags.get("mem-fraction-static")
    if value is None and record.launch is not None:
        value = record.launch.option("mem-fraction-static")
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _ttft_p99(record: TrialRecord, level: int | str) -> float | None:
    from autotune.bench.metrics import metric_value

    if record.bench is None or (isinstance(level, str) and level not in ("max", "min")):
        return None  # an open-loop level has no TTFT tie-break here
    try:
        return metric_value(record.bench, "ttft_ms.p99", level)
    except ValueError:
        return None


def _clean(record: TrialRecord, key: str) -> bool:
    """A relaunch that counts as an observation: complete, feasible, with a value of the objective."""
    return record.outcome is TrialOutcome.COMPLETE and record.feasible and _value(record, key) is not None


def finalist_stats(
    trials: Mapping[int, TrialRecord], runs: Sequence[FinalistRun], objective: Objective
) -> list[FinalistStats]:
    """Per finalist (in ``trials``), its clean launches' objective values, TTFT p99s (at the objective's level) and
    memory setting."""
    key, level = objective.key, objective.level
    out = []
    for number, trial in trials.items():
        mine = [r.record for r in runs if r.repeats == number]
        clean = [rec for rec in mine if _clean(rec, key)]
        values = tuple(float(_value(rec, key)) for rec in clean)  # type: ignore[arg-type]  # _clean(rec, key) above keeps only records whose value is present
        ttfts = tuple(t for rec in clean if (t := _ttft_p99(rec, level)) is not None)
        out.append(
            FinalistStats(
                number=number,
                trial_id=trial.trial_id,
                params=dict(trial.params),
                values=values,
                launches=len(mine),
                unclean=len(mine) - len(clean),
                objective=interval(values) if values else None,
                ttft_p99=ttfts,
                mem_fraction=_mem_fraction(trial),
            )
        )
    return out


def _separable(
    a: Sequence[float], b: Sequence[float], alpha: float, halves: tuple[float | None, float | None] = (None, None)
) -> tuple[bool, float | None]:
    """Welch's t test; where neither side varies, the means against the measurement windows' combined 95% half-width
    ``halves`` (p None), and not separable without them."""
    if len(a) < 2 or len(b) < 2:
        return False, None
    if min(a) == max(a) and min(b) == max(b):
        ha, hb = halves
        half = math.hypot(ha, hb) if ha is not None and hb is not None else 0.0
        return half > 0 and abs(a[0] - b[0]) > half, None
    p = welch(a, b).p_value
    return p < alpha, p


def _window_half(runs: Sequence[FinalistRun], number: int, objective: Objective) -> float | None:
    """The mean 95% half-width of the objective over the measurement windows of a finalist's clean relaunches (None
    where one has no interval)."""
    from autotune.bench.metrics import metric_interval

    halves = []
    for run in runs:
        if run.repeats != number or not _clean(run.record, objective.key) or run.record.bench is None:
            continue
        try:
            iv = metric_interval(run.record.bench, objective.metric, objective.level)
        except ValueError:
            iv = None
        if iv is None or iv.low is None or iv.high is None:
            return None
        halves.append((iv.high - iv.low) / 2)
    return math.fsum(halves) / len(halves) if halves else None


def _pct(leader: float, other: float, direction: Direction) -> float:
    """How much better the leader is, in % of the other (as the verdict's gain over the baseline)."""
    diff = (leader - other) if direction == "maximize" else (other - leader)
    return 100.0 * diff / abs(other) if other else 0.0


def decide(
    trials: Mapping[int, TrialRecord], runs: Sequence[FinalistRun], objective: Objective, alpha: float = 0.05
) -> Decision:
    """Decide the winner among the finalists ``trials`` (by number) from their relaunches ``runs`` on the primary
    ``objective`` (see module doc)."""
    key, direction = objective.key, objective.direction
    stats = finalist_stats(trials, runs, objective)
    stages = tuple(sorted({r.stage for r in runs}))
    common: dict[str, Any] = {"objective_key": key, "direction": direction, "alpha": alpha, "stages": stages}
    # A finalist whose own trial missed a constraint (an infeasible baseline) never wins; one with a failed or
    # infeasible relaunch cannot win while one relaunched cleanly every time.
    eligible = [s for s in stats if s.values and trials[s.number].feasible]
    clean = [s for s in eligible if s.unclean == 0] or eligible
    if not clean:
        return Decision(
            method="none",
            winner=None,
            winner_trial_id=None,
            stats=tuple(stats),
            **common,
            summary="no finalist relaunch completed feasibly; the export keeps the best single trial",
        )
    sign = -1.0 if direction == "maximize" else 1.0
    clean.sort(key=lambda s: (sign * (s.mean or 0.0), s.number))
    leader = clean[0]
    if len(clean) == 1:
        failed = [str(s.number) for s in stats if s is not leader and trials[s.number].feasible]
        missed = [str(s.number) for s in stats if not trials[s.number].feasible]
        parts = [f"finalists {', '.join(failed)} had failed or infeasible relaunches"] if failed else []
        parts += [f"trial {', '.join(missed)} missed a study constraint in its own launch"] if missed else []
        why = f" ({'; '.join(parts)})" if parts else ""
        return Decision(
            method="single",
            winner=leader.number,
            winner_trial_id=leader.trial_id,
            stats=tuple(stats),
            leader=leader.number,
            **common,
            summary=f"trial {leader.number} is the only finalist that relaunched cleanly"
            + (f" ({len(leader.values)} of its {leader.launches} relaunches)" if leader.unclean else "")
            + why,
        )
    comparisons = []
    lead_half = _window_half(runs, leader.number, objective)
    for s in clean[1:]:
        sep, p = _separable(leader.values, s.values, alpha, (lead_half, _window_half(runs, s.number, objective)))
        comparisons.append(
            Comparison(
                number=s.number, diff_pct=_pct(leader.mean or 0.0, s.mean or 0.0, direction), p_value=p, separable=sep
            )
        )
    tied = [leader] + [s for s, c in zip(clean[1:], comparisons, strict=True) if not c.separable]
    runner = comparisons[0]
    p_text = (
        f"p={runner.p_value:.3g}"
        if runner.p_value is not None
        else "within their measurement windows (relaunches that repeat one figure)"
        if len(leader.values) >= 2 and len(clean[1].values) >= 2
        else "fewer than 2 clean launches"
    )
    if len(tied) == 1:
        return Decision(
            method="separable",
            winner=leader.number,
            winner_trial_id=leader.trial_id,
            comparisons=tuple(comparisons),
            leader=leader.number,
            stats=tuple(stats),
            **common,
            summary=(
                f"trial {leader.number} wins: its {key} is {runner.diff_pct:.1f}% better than the runner-up "
                f"(trial {runner.number}) over {len(leader.values)} vs {len(clean[1].values)} relaunches, "
                + (
                    f"Welch t {p_text} < {alpha:g}"
                    if runner.p_value is not None
                    else "relaunches that repeat one figure, apart by more than their measurement windows' 95% intervals"
                )
            ),
        )
    means = [s.mean or 0.0 for s in tied]
    within = 100.0 * (max(means) - min(means)) / max(abs(m) for m in means) if any(means) else 0.0
    winner, secondary = _by_secondary(tied, alpha)
    names = ", ".join(str(s.number) for s in tied)
    return Decision(
        method="tie",
        winner=winner.number,
        winner_trial_id=winner.trial_id,
        tied=tuple(s.number for s in tied),
        tie_within_pct=within,
        secondary=secondary,
        comparisons=tuple(comparisons),
        stats=tuple(stats),
        leader=leader.number,
        **common,
        summary=(
            f"finalists {names} tie within {within:.1f}% on {key} (Welch t, alpha {alpha:g}; leader vs runner-up "
            f"{p_text}); trial {winner.number} is picked by {secondary}"
        ),
    )


def _by_secondary(tied: Sequence[FinalistStats], alpha: float) -> tuple[FinalistStats, str]:
    """Among tied finalists (``tied[0]`` is the leader, the best relaunch mean): the lowest TTFT p99 where that is
    separable; else the leader, since its mean is still the best estimate of the objective (the tie says the
    difference is within noise, not that there is none); the memory setting and the trial number only break exactly
    equal means. Returns the pick and the criterion that decided it."""
    with_ttft = [s for s in tied if s.ttft_p99]
    reason = ""
    if len(with_ttft) == len(tied):
        best = min(tied, key=lambda s: (math.fsum(s.ttft_p99) / len(s.ttft_p99), s.number))
        rest = [s for s in tied if s is not best]
        if all(_separable(best.ttft_p99, s.ttft_p99, alpha)[0] for s in rest):
            return best, "lower TTFT p99 (separable, Welch t)"
        reason = "TTFT p99 also within noise; "
    top = [s for s in tied if s.mean == tied[0].mean]
    if len(top) == 1:
        return top[0], reason + "the best relaunch mean (the best estimate, though not a separable difference)"
    mems = [s for s in top if s.mem_fraction is not None]
    if len(mems) == len(top) and len({s.mem_fraction for s in top}) > 1:
        best = min(top, key=lambda s: (s.mem_fraction, s.number))
        return best, reason + "equal means; lower --mem-fraction-static (less memory held)"
    best = min(top, key=lambda s: s.number)
    return best, reason + "equal means; the lowest trial number"


def study_outcome(
    records: Sequence[TrialRecord],
    plans: Sequence[StagePlan],
    runs: Sequence[FinalistRun],
    *,
    objective: Objective,
    alpha: float,
    count: int,
    baseline: Mapping[str, Any] | None = None,
) -> FinalistOutcome:
    """The finalist stage's result on the primary ``objective`` for the study's current top ``count`` configs (and its
    baseline: ``stage_finalists``)."""
    key, direction = objective.key, objective.direction
    finalists = stage_finalists(records, key, direction, count, baseline)
    base = baseline_number(records, baseline)
    if count <= 0:
        return FinalistOutcome(
            (),
            None,
            note="no finalist stage (finalists count 0): the winner is chosen from the single launches",
            baseline=base,
        )
    if not finalists:
        return FinalistOutcome((), None, note="no feasible trial, so no finalist stage", baseline=base)
    stages = [p.stage for p in plans if p.finalists == finalists]
    mine = [r for r in runs if r.stage in stages and r.repeats in finalists]
    if not mine:
        return FinalistOutcome(
            finalists,
            None,
            note=f"no finalist stage ran for trials {', '.join(map(str, finalists))}"
            " yet: the winner is chosen from the single launches",
            baseline=base,
        )
    by_number = {r.number: r for r in records}
    trials = {n: by_number[n] for n in finalists}
    pooled = decide(trials, mine, objective, alpha)
    latest = max((p for p in plans if p.finalists == finalists), key=lambda p: p.stage)
    missing = missing_slots(latest, runs)
    if missing and pooled.leader is not None:
        pooled = incomplete(pooled, latest, len(missing))
    per_stage = tuple(decide(trials, [r for r in mine if r.stage == s], objective, alpha) for s in stages)
    return FinalistOutcome(
        finalists,
        pooled,
        per_stage,
        launches=len(mine),
        winner_levels=winner_levels(mine, pooled.winner, key),
        baseline=base,
        runs=tuple(mine),
    )


def incomplete(decision: Decision, plan: StagePlan, missing: int) -> Decision:
    """A stage that was stopped before all its relaunches ran declares no winner: the export keeps the leader by
    relaunch mean, and says the stage must be resumed. (A finalist with fewer than 2 relaunches cannot be compared, so
    the tie rule would otherwise pick by a secondary criterion among configs that were never measured enough.)"""
    planned = len(plan.slots())
    leader = next(s for s in decision.stats if s.number == decision.leader)
    summary = (
        f"finalist stage {plan.stage} is incomplete ({planned - missing} of {planned} relaunches ran): trial "
        f"{leader.number} leads by its relaunch mean ({_fmt_mean(leader)}), but no winner is declared until "
        "the stage is resumed (run the same command again)"
    )
    return replace(
        decision,
        method="incomplete",
        winner=leader.number,
        winner_trial_id=leader.trial_id,
        tied=(),
        tie_within_pct=None,
        secondary="",
        summary=summary,
    )


def _fmt_mean(stats: FinalistStats) -> str:
    n = len(stats.values)
    return f"{stats.mean:,.1f} over {n} relaunch{'es' if n != 1 else ''}" if stats.mean is not None else "no value"


def winner_levels(runs: Sequence[FinalistRun], winner: int | None, key: str) -> tuple[dict[str, Any], ...]:
    """The winner's clean relaunches (those the decision counted) pooled per load level across launches. The interval
    for one new launch uses the launch-to-launch spread pooled over every finalist's clean relaunches (relative to each
    config's mean) where that has more degrees of freedom than the winner's relaunches alone."""
    if winner is None:
        return ()

    def levels(number: int) -> list[list[dict[str, Any]]]:
        return [
            [asdict(lv) for lv in r.record.bench.levels]
            for r in runs
            if r.repeats == number and _clean(r.record, key) and r.record.bench is not None
        ]

    numbers = sorted({r.repeats for r in runs})
    spread = launch_spread([levels(n) for n in numbers])
    basis = f"the launch-to-launch sd relative to the mean, pooled over the {len(numbers)} finalists' clean relaunches"
    return tuple(across_launches(levels(winner), spread, basis))
