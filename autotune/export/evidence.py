"""The evidence every statement of an export is decided by, and the one comparison they all use. Pure.

A config's figure at a load level is the mean over its launches: its clean finalist relaunches where it has any (as
the finalist stage's decision counts them: complete and feasible; a config with only unclean relaunches, such as an
infeasible baseline, counts its complete ones), else its own single launch. Two configs compare by one rule:

- both with at least 2 launches that vary: Welch's t test, separable when p < alpha (the finalist stage's own test, so
  a pair the stage calls a tie is a tie here too);
- otherwise, where the study's relaunches vary: a t test with the launch-to-launch spread pooled over every relaunched
  config (relative to each config's mean, ``pooled_relative_sd``) standing in for the missing spread;
- otherwise (no relaunch at all, or relaunches that repeat one figure, as a deterministic simulator's do): the
  launches' measurement-window intervals; separable when the difference is larger than their combined half-widths.
  This says nothing about launch-to-launch variation, and says so. A spread of zero is never taken for a measurement
  without noise: it would make any difference, +0.001% included, "separable".

A difference the rule cannot separate is a *tie*, wherever it is stated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from autotune.bench.stats import mean_sd, pooled_relative_sd, t_cdf, t_quantile, welch
from autotune.finalists.outcome import FinalistOutcome
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord
from autotune.verify.compare import METRICS, level_value

Direction = Literal["maximize", "minimize"]
Basis = Literal["relaunches", "pooled launch spread", "measurement windows", "none"]


@dataclass(frozen=True)
class Samples:
    """One config's launches at one level: the values, and whether they are finalist relaunches."""

    number: int
    values: tuple[float, ...]
    relaunched: bool
    window_half: float | None = None  # the launches' 95% half-width over their windows (mean; None: one window)

    @property
    def mean(self) -> float:
        return math.fsum(self.values) / len(self.values)


@dataclass(frozen=True)
class Difference:
    """``a`` against ``b``: the gain of ``a`` in percent of ``b``'s mean (signed so that > 0 favours ``a`` in the
    metric's direction), its 95% interval, and whether the noise separates them."""

    gain_pct: float
    low_pct: float | None
    high_pct: float | None
    separable: bool
    p_value: float | None
    basis: Basis

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "gain_pct": json_pct(self.gain_pct)}


def json_pct(value: float) -> float | None:
    """A gain for JSON: None for the +-inf% of a gain over 0 (JSON has no infinity)."""
    return value if math.isfinite(value) else None


def _level(rec: TrialRecord, concurrency: int | str) -> dict | None:
    if rec.bench is None:
        return None
    for lv in rec.bench.levels:
        if lv.key == concurrency and lv.requests > 0 and lv.failed == 0:
            return asdict(lv)
    return None


def _value(lv: Mapping[str, Any], metric: str) -> float | None:
    """A level's value of ``metric``: verify's metrics, or a scalar field of the level (``goodput``)."""
    if metric in METRICS:
        return level_value(lv, metric)
    v = lv.get(metric)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _window_half(lv: Mapping[str, Any], metric: str) -> float | None:
    """A level's 95% half-width of ``metric`` over its measurement windows (None: one window, or not kept)."""
    iv = (lv.get("intervals") or {}).get(metric)
    return (iv["high"] - iv["low"]) / 2 if iv and iv.get("low") is not None and iv.get("high") is not None else None


class Evidence:
    """Per config and level, the launches an export's statements rest on (see the module doc)."""

    def __init__(self, records: Sequence[TrialRecord], finalists: FinalistOutcome | None, alpha: float = 0.05) -> None:
        self.records = {r.number: r for r in records}
        self.alpha = finalists.decision.alpha if finalists is not None and finalists.decision is not None else alpha
        self._runs: dict[int, list[TrialRecord]] = {}
        for run in finalists.runs if finalists is not None else ():
            self._runs.setdefault(run.repeats, []).append(run.record)

    @property
    def has_relaunches(self) -> bool:
        return bool(self._runs)

    def _relaunches(self, number: int) -> list[TrialRecord]:
        runs = [r for r in self._runs.get(number, []) if r.outcome is TrialOutcome.COMPLETE]
        clean = [r for r in runs if r.feasible]
        return clean or runs

    def missed_on_relaunch(self, number: int) -> bool:
        """Relaunched, and no relaunch completed meeting every constraint (the finalist stage counted none)."""
        runs = self._runs.get(number, [])
        return bool(runs) and not any(r.outcome is TrialOutcome.COMPLETE and r.feasible for r in runs)

    def samples(self, number: int, concurrency: int | str, metric: str = "output_tok_per_s") -> Samples | None:
        """The config's values of ``metric`` at ``concurrency`` (None: not measured there)."""
        relaunches = self._relaunches(number)
        if relaunches:
            levels = [lv for r in relaunches if (lv := _level(r, concurrency)) is not None]
            values = [v for lv in levels if (v := _value(lv, metric)) is not None]
            if values:
                halves = [_window_half(lv, metric) for lv in levels if _value(lv, metric) is not None]
                half = math.fsum(h for h in halves if h is not None) / len(halves) if None not in halves else None
                return Samples(number, tuple(values), relaunched=True, window_half=half)
        rec = self.records.get(number)
        lv = _level(rec, concurrency) if rec is not None else None
        value = _value(lv, metric) if lv is not None else None
        if value is None or not math.isfinite(value):
            return None
        return Samples(number, (value,), relaunched=False, window_half=_window_half(lv, metric) if lv else None)

    def _spread(self, concurrency: int | str, metric: str) -> tuple[float, int] | None:
        groups = [
            s.values for n in self._runs if (s := self.samples(n, concurrency, metric)) is not None and s.relaunched
        ]
        return pooled_relative_sd(groups)

    def compare(
        self, a: Samples, b: Samples, direction: Direction, concurrency: int | str, metric: str = "output_tok_per_s"
    ) -> Difference:
        """``a`` against ``b`` by the module's one rule. Against a mean of 0 (a goodput where no request met the
        SLO) the gain is +-inf% with no interval: no percentage of 0 exists."""
        d = self._compare(a, b, direction, concurrency, metric)
        if b.mean or a.mean == b.mean:
            return d
        better = (a.mean > b.mean) == (direction == "maximize")
        return replace(d, gain_pct=math.inf if better else -math.inf, low_pct=None, high_pct=None)

    def _compare(self, a: Samples, b: Samples, direction: Direction, concurrency: int | str, metric: str) -> Difference:
        sign = 1.0 if direction == "maximize" else -1.0
        ma, mb = a.mean, b.mean
        scale = abs(mb) if mb else 1.0
        gain = 100.0 * sign * (ma - mb) / scale + 0.0  # + 0.0: equal means are +0.0%, never -0.0% (minimize)
        if len(a.values) >= 2 and len(b.values) >= 2:
            w = welch(a.values, b.values)
            _, sa = mean_sd(a.values)
            _, sb = mean_sd(b.values)
            se = math.sqrt((sa or 0.0) ** 2 / len(a.values) + (sb or 0.0) ** 2 / len(b.values))
            if se > 0:  # else each side repeats one figure: no launch-to-launch spread to judge by (below)
                half = t_quantile(0.975, w.df) * se
                return Difference(
                    gain,
                    gain - 100 * half / scale,
                    gain + 100 * half / scale,
                    w.p_value < self.alpha,
                    w.p_value,
                    "relaunches",
                )
        spread = self._spread(concurrency, metric)
        se = spread[0] * math.sqrt(ma * ma / len(a.values) + mb * mb / len(b.values)) if spread is not None else 0.0
        if spread is not None and se > 0:
            df = spread[1]
            t = abs(ma - mb) / se
            p = min(1.0, max(0.0, 2.0 * (1.0 - t_cdf(t, df))))
            half = t_quantile(0.975, df) * se
            return Difference(
                gain, gain - 100 * half / scale, gain + 100 * half / scale, p < self.alpha, p, "pooled launch spread"
            )
        half = (
            math.hypot(a.window_half, b.window_half) if a.window_half is not None and b.window_half is not None else 0
        )
        if half <= 0:  # one window, or windows that repeat one figure (a simulator without noise): no interval
            return Difference(gain, None, None, False, None, "none")
        return Difference(
            gain, gain - 100 * half / scale, gain + 100 * half / scale, abs(ma - mb) > half, None, "measurement windows"
        )


def ranked(
    evidence: Evidence,
    numbers: Sequence[int],
    concurrency: int | str,
    direction: Direction,
    metric: str = "output_tok_per_s",
    first: int | None = None,
) -> tuple[Samples | None, tuple[int, ...]]:
    """The best of ``numbers`` at a level by mean (``first``, where given and measured there, leads instead: the
    export's own winner at its objective's level), and the configs the noise cannot separate from it. A config whose
    every relaunch failed or missed a constraint is left out (but ``first``)."""
    samples = [
        s
        for n in numbers
        if (n == first or not evidence.missed_on_relaunch(n))
        and (s := evidence.samples(n, concurrency, metric)) is not None
    ]
    if not samples:
        return None, ()
    sign = -1.0 if direction == "maximize" else 1.0
    samples.sort(key=lambda s: (sign * s.mean, s.number))
    lead = next((s for s in samples if s.number == first), samples[0])
    tied = tuple(
        s.number
        for s in samples
        if s is not lead and not evidence.compare(lead, s, direction, concurrency, metric).separable
    )
    return lead, tied


def describe(basis: Basis) -> str:
    return {
        "relaunches": "Welch's t over relaunches",
        "pooled launch spread": "t test with the study's launch-to-launch spread (a single launch on a side)",
        "measurement windows": "measurement-window intervals of single launches or of relaunches that repeat one "
        "figure (launch-to-launch variation not known)",
        "none": "no interval: one window per launch, or no spread at all",
    }[basis]


def tie_text(lead: int, tied: Sequence[int]) -> str:
    return f"#{lead}" + (f" (tie with {', '.join(f'#{n}' for n in tied)}: within the noise)" if tied else "")


def level_of(objective: Objective, load_levels: Sequence[int]) -> int | None:
    """The concurrency an objective's level names (``max`` / ``min``: the highest / lowest of ``load_levels``), or None
    for an open-loop level (``rate8``, ``trace1``), which names no concurrency."""
    if objective.level == "max":
        return max(load_levels)
    if objective.level == "min":
        return min(load_levels)
    level = str(objective.level)
    return int(level) if level.isdigit() else None


def records_by_number(records: Sequence[TrialRecord]) -> Mapping[int, TrialRecord]:
    return {r.number: r for r in records}
