"""Summaries of simulated studies: launches to 98% of the optimum, regret at fixed budgets, exports below 95%."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

BUDGETS = (10, 20, 40)
TARGET = 0.98
POOR = 0.95


def launches_to(ratios: Sequence[float], target: float = TARGET) -> float:
    """Launches until the exported config is worth ``target`` of the optimum; ``inf`` when never within the run."""
    for i, r in enumerate(ratios):
        if r >= target - 1e-12:
            return float(i + 1)
    return math.inf


def ratio_at(ratios: Sequence[float], n: int) -> float:
    """The exported config's share of the optimum after ``n`` launches (the last one if the run stopped earlier)."""
    if not ratios:
        return 0.0
    return ratios[min(n, len(ratios)) - 1]


def median(values: Sequence[float]) -> float:
    """Median that tolerates ``inf`` (runs that never reached the target)."""
    return statistics.median(values) if values else math.nan


@dataclass(frozen=True)
class Summary:
    runs: int
    median_launches: float  # to TARGET; inf when more than half the runs never got there
    reached: float  # share of runs that got there
    regret: dict[int, float]  # mean of 1 - ratio at each budget
    below_poor: float  # share of runs whose export after the last budget is below POOR of the optimum
    within_2pct_at_40: float  # share of runs with an export within 2% of the optimum after 40 launches
    median_after_seeds: float  # launches to TARGET after the run's first launches of seed points (inf: never)
    mean_launches: float  # launches the search made (fewer than the budget where it stopped early), finalists apart

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "median_launches": self.median_launches,
            "reached": self.reached,
            "regret": {str(k): v for k, v in self.regret.items()},
            "below_poor": self.below_poor,
            "within_2pct_at_40": self.within_2pct_at_40,
            "median_after_seeds": self.median_after_seeds,
            "mean_launches": self.mean_launches,
        }


def summarize(runs: Iterable[dict[str, Any]]) -> Summary:
    """``run["seed_launches"]`` (optional): how many of the run's first launches were seed points."""
    runs = list(runs)
    rs = [r["ratios"] for r in runs]
    launches = [launches_to(r) for r in rs]
    last = max(BUDGETS)
    return Summary(
        runs=len(rs),
        median_launches=median(launches),
        reached=sum(math.isfinite(x) for x in launches) / len(rs) if rs else math.nan,
        regret={b: statistics.fmean(1 - ratio_at(r, b) for r in rs) if rs else math.nan for b in BUDGETS},
        below_poor=sum(ratio_at(r, last) < POOR for r in rs) / len(rs) if rs else math.nan,
        within_2pct_at_40=sum(ratio_at(r, 40) >= TARGET for r in rs) / len(rs) if rs else math.nan,
        median_after_seeds=median([max(x - r.get("seed_launches", 0), 0) for x, r in zip(launches, runs, strict=True)]),
        mean_launches=statistics.fmean(len(r) for r in rs) if rs else math.nan,
    )


def fmt_launches(x: float, cap: int) -> str:
    return f">{cap}" if not math.isfinite(x) else (f"{x:g}")
