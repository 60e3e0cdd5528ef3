"""The Pareto set of feasible trials: peak throughput (maximize) vs decode latency (minimize). Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autotune.export.accessors import is_speculative, throughput, tpot_median
from autotune.trial.records import TrialOutcome, TrialRecord


@dataclass(frozen=True)
class ParetoPoint:
    number: int
    trial_id: str
    peak_tok_per_s: float  # output_tok_per_s at the highest load level
    tpot_ms: float  # median TPOT at the lowest load level
    speculative: bool
    params: dict[str, Any]
    flags: dict[str, Any]


@dataclass(frozen=True)
class ParetoFront:
    """Points are feasible trials with both metrics; ``front`` is sorted by latency, ``dominated`` by number."""

    peak_level: int
    latency_level: int
    front: tuple[ParetoPoint, ...]
    dominated: tuple[ParetoPoint, ...]


def dominates(a: ParetoPoint, b: ParetoPoint) -> bool:
    """a is at least as good on both axes and strictly better on one."""
    no_worse = a.peak_tok_per_s >= b.peak_tok_per_s and a.tpot_ms <= b.tpot_ms
    better = a.peak_tok_per_s > b.peak_tok_per_s or a.tpot_ms < b.tpot_ms
    return no_worse and better


def pareto_front(records: Sequence[TrialRecord], load_levels: Sequence[int]) -> ParetoFront:
    """Feasible, completed trials that no other feasible trial dominates. Equal points are all kept."""
    hi, lo = max(load_levels), min(load_levels)
    points = []
    for rec in sorted(records, key=lambda r: r.number):
        if not rec.feasible or rec.outcome is not TrialOutcome.COMPLETE:
            continue
        peak, lat = throughput(rec, hi), tpot_median(rec, lo)
        if peak is None or lat is None:
            continue
        points.append(
            ParetoPoint(
                number=rec.number,
                trial_id=rec.trial_id,
                peak_tok_per_s=peak,
                tpot_ms=lat,
                speculative=is_speculative(rec),
                params=dict(rec.params),
                flags=dict(rec.flags),
            )
        )
    front = [p for p in points if not any(dominates(q, p) for q in points)]
    dominated = [p for p in points if p not in front]
    front.sort(key=lambda p: (p.tpot_ms, -p.peak_tok_per_s, p.number))
    return ParetoFront(peak_level=hi, latency_level=lo, front=tuple(front), dominated=tuple(dominated))
