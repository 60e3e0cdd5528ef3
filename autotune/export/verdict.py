"""The verdict against the study's baseline (the user's current configuration, ``StudySpec.baseline``). Pure.

The export opens with it: the recommended config and its gain over the baseline at every load level with the 95%
interval of that gain, or that no config beats the baseline beyond the noise. The gain is decided at the primary
objective's level by ``autotune.export.evidence`` (the same evidence and test as every other statement of the report,
relaunch means where there are relaunches); the other levels are shown with their own intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from autotune.bench.stats import launches_to_separate
from autotune.export.best import BestChoice
from autotune.export.evidence import Difference, Evidence, Samples, describe, json_pct, level_of
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord

Kind = Literal["no_baseline", "baseline_failed", "beats", "no_better", "is_best", "no_feasible"]
GAIN_METRIC = "output_tok_per_s"


@dataclass(frozen=True)
class LevelGain:
    """The recommended config against the baseline at one load level (``metric``, e.g. output tok/s)."""

    concurrency: int
    metric: str
    baseline_mean: float | None
    recommended_mean: float | None
    baseline_launches: int
    recommended_launches: int
    difference: Difference | None  # None: one side not measured at this level

    def to_json(self) -> dict[str, Any]:
        d = self.difference
        return {
            "concurrency": self.concurrency,
            "metric": self.metric,
            "baseline_mean": self.baseline_mean,
            "recommended_mean": self.recommended_mean,
            "baseline_launches": self.baseline_launches,
            "recommended_launches": self.recommended_launches,
            **(
                {
                    "gain_pct": json_pct(d.gain_pct),
                    "gain_low_pct": d.low_pct,
                    "gain_high_pct": d.high_pct,
                    "separable": d.separable,
                    "p_value": d.p_value,
                    "basis": d.basis,
                }
                if d is not None
                else {}
            ),
        }


@dataclass(frozen=True)
class BaselineVerdict:
    kind: Kind
    baseline: int | None  # the trial that measured the baseline
    recommended: int | None  # the export's best
    headline: str
    gains: tuple[LevelGain, ...] = ()
    baseline_feasible: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "baseline_trial": self.baseline,
            "recommended_trial": self.recommended,
            "headline": self.headline,
            "baseline_feasible": self.baseline_feasible,
            "gains": [g.to_json() for g in self.gains],
        }


def fmt_gain(d: Difference | None) -> str:
    if d is None:
        return "not measured"
    if math.isinf(d.gain_pct):
        return f"{'+' if d.gain_pct > 0 else '-'}inf% (from 0: no percentage)"
    if d.low_pct is None or d.high_pct is None:
        return f"{d.gain_pct:+.1f}% (no interval)"
    return f"{d.gain_pct:+.1f}% [{d.low_pct:+.1f}% .. {d.high_pct:+.1f}%]"


def baseline_verdict(
    records: Sequence[TrialRecord],
    best: BestChoice,
    baseline: int | None,
    evidence: Evidence,
    objective: Objective,
    load_levels: Sequence[int],
    *,
    named: bool = False,
) -> BaselineVerdict:
    """Judge the export's best against the baseline trial (see module doc). ``named``: the study names a baseline
    point, whether or not a trial measured it."""
    if baseline is None:
        return BaselineVerdict(
            "no_baseline",
            None,
            best.record.number if best.record else None,
            "Your current configuration (the study's baseline point) has no finished trial yet: there is nothing "
            "to judge the recommendation against."
            if named
            else "This study names no baseline (no study.baseline, no points_to_evaluate): there is no "
            "current configuration to judge the recommendation against.",
        )
    base = next((r for r in records if r.number == baseline), None)
    rec = best.record
    if base is None:
        return BaselineVerdict("no_baseline", None, rec.number if rec else None, "The baseline was not measured.")
    if rec is None:
        return BaselineVerdict(
            "no_feasible",
            baseline,
            None,
            f"Your current configuration (trial {baseline}) and every other config miss the "
            f"study's constraints or failed: nothing to recommend. {best.reason}",
            baseline_feasible=base.feasible,
        )
    gains = tuple(_gain(evidence, rec.number, baseline, c, objective) for c in sorted(load_levels))
    where, d, pair = _headline(evidence, rec.number, baseline, objective, load_levels)
    if base.outcome is not TrialOutcome.COMPLETE:
        why = base.failure.value if base.failure is not None else base.outcome.value
        return BaselineVerdict(
            "baseline_failed",
            baseline,
            rec.number,
            f"Your current configuration (trial {baseline}) did not complete ({why}: "
            f"{base.message[:160]}). Recommended: trial {rec.number}.",
            gains,
            False,
        )
    if rec.number == baseline:
        return BaselineVerdict(
            "is_best",
            baseline,
            rec.number,
            f"No config beats your current one (trial {baseline}) beyond the noise: it is the "
            f"study's best on {where}. Keep it.",
            gains,
            base.feasible,
        )
    if not base.feasible:
        missed = ", ".join(k for k, v in base.constraints.items() if not (isinstance(v, (int, float)) and v <= 0))
        gain = f" Gain on {where}: {fmt_gain(d)}." if d is not None else ""
        return BaselineVerdict(
            "beats",
            baseline,
            rec.number,
            f"Your current configuration (trial {baseline}) misses the study's constraints "
            f"({missed or 'see the trial'}); recommended: trial {rec.number}, which meets them.{gain}",
            gains,
            False,
        )
    if d is None:
        return BaselineVerdict(
            "no_better",
            baseline,
            rec.number,
            f"Trial {rec.number} is recommended, but it and your current configuration (trial "
            f"{baseline}) are not both measured at {where}: no gain can be stated.",
            gains,
            True,
        )
    if d.separable and d.gain_pct > 0:
        return BaselineVerdict(
            "beats",
            baseline,
            rec.number,
            f"Recommended: trial {rec.number}. It beats your current configuration (trial "
            f"{baseline}) on {where} by {fmt_gain(d)} ({describe(d.basis)}).",
            gains,
            True,
        )
    return BaselineVerdict(
        "no_better",
        baseline,
        rec.number,
        f"No config beats your current one (trial {baseline}) beyond the noise on {where}: the best, "
        f"trial {rec.number}, differs by {fmt_gain(d)} ({describe(d.basis)}), a tie.{_rounds_note(d, pair, evidence)}",
        gains,
        True,
    )


def _rounds_note(d: Difference, pair: tuple[Samples, Samples] | None, ev: Evidence) -> str:
    """For a tie over relaunches with the recommendation ahead: how many relaunches a side would separate it, were
    the means and spread measured to hold (the finalist stage's ``rounds``)."""
    if d.basis != "relaunches" or d.gain_pct <= 0 or pair is None:
        return ""
    n = launches_to_separate(pair[0].values, pair[1].values, ev.alpha)
    if n is None:
        return " At the spread these relaunches show, more than 20 a side would be needed to separate them."
    return (
        f" At the spread these relaunches show, {n} relaunches a side (`study.finalists.rounds: {n}`) would separate "
        "a difference this large about half the time."
    )


def judged_level(objective: Objective, load_levels: Sequence[int]) -> int:
    """The concurrency the verdict is decided at: the objective's, or the highest for an objective at an open-loop level
    (``goodput@rate8``: a rate names no concurrency, and the evidence is kept per concurrency)."""
    at = level_of(objective, load_levels)
    return at if at is not None else max(load_levels)


def _headline(
    ev: Evidence, rec: int, base: int, objective: Objective, load_levels: Sequence[int]
) -> tuple[str, Difference | None, tuple[Samples, Samples] | None]:
    """Where the verdict is decided, as its headline names it, and the gain there: the objective itself at its own
    level (a concurrency, or an open-loop level such as ``rate8``) where both configs have figures of it, else output
    tok/s at that level, named as such."""
    at = level_of(objective, load_levels)
    level: int | str = at if at is not None else str(objective.level)
    named = f"`{objective.key}`" + (f" (concurrency {at})" if at is not None else "")
    for metric, direction in ((objective.metric, objective.direction), (GAIN_METRIC, "maximize")):
        a, b = ev.samples(rec, level, metric), ev.samples(base, level, metric)
        if a is not None and b is not None:
            where = named if metric == objective.metric else f"`{metric}@{level}` (`{objective.key}` has no figures)"
            return where, ev.compare(a, b, direction, level, metric), (a, b)
    return named, None, None


def _gain(ev: Evidence, rec: int, base: int, c: int, objective: Objective) -> LevelGain:
    metric = (
        objective.metric
        if objective.metric in ("output_tok_per_s", "ttft_ms.p99", "tpot_ms.median", "itl_ms.median")
        else GAIN_METRIC
    )
    direction = objective.direction if metric == objective.metric else "maximize"
    a, b = ev.samples(rec, c, metric), ev.samples(base, c, metric)
    diff = ev.compare(a, b, direction, c, metric) if a is not None and b is not None else None
    return LevelGain(
        c,
        metric,
        b.mean if b else None,
        a.mean if a else None,
        len(b.values) if b else 0,
        len(a.values) if a else 0,
        diff,
    )


@dataclass(frozen=True)
class Spread:
    """The recommended config against the worst complete config at the objective's level: what tuning is worth."""

    worst: int
    concurrency: int
    metric: str
    worst_mean: float
    best_mean: float
    difference: Difference

    def to_json(self) -> dict[str, Any]:
        return {
            "worst_trial": self.worst,
            "concurrency": self.concurrency,
            "metric": self.metric,
            "worst_mean": self.worst_mean,
            "best_mean": self.best_mean,
            **self.difference.to_json(),
        }


def spread(
    records: Sequence[TrialRecord],
    best: BestChoice,
    evidence: Evidence,
    objective: Objective,
    load_levels: Sequence[int],
) -> Spread | None:
    """The best against the worst complete trial measured at the objective's level (None: fewer than two)."""
    if best.record is None:
        return None
    at = judged_level(objective, load_levels)
    metric = (
        objective.metric
        if objective.metric in ("output_tok_per_s", "ttft_ms.p99", "tpot_ms.median", "itl_ms.median")
        else GAIN_METRIC
    )
    direction = objective.direction if metric == objective.metric else "maximize"
    samples = [
        s
        for r in records
        if r.outcome is TrialOutcome.COMPLETE
        and r.number != best.record.number
        and (s := evidence.samples(r.number, at, metric)) is not None
    ]
    top = evidence.samples(best.record.number, at, metric)
    if not samples or top is None:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    worst = min(samples, key=lambda s: (sign * s.mean, -s.number))
    return Spread(worst.number, at, metric, worst.mean, top.mean, evidence.compare(top, worst, direction, at, metric))
