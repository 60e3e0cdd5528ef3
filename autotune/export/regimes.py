"""Per-traffic-regime recommendations: the best config at each load level, and where speculation flips. Pure.

Rate and trace levels (open loop) are regimes too: there every config is offered the same traffic, so the best is the
one with the highest goodput (requests/s meeting every SLO; output tok/s when the study has no SLO), output tok/s
breaking ties. A trial is *eligible* at a concurrency when it completed, that level was measured with no failed request, and every
constraint that names that level (``...@<c>``, ``@max`` = the highest level, ``@min`` = the lowest) is satisfied;
constraints that name no level apply everywhere. So a speculative config that misses the study's SLO at the highest
level can still be the right answer for low-concurrency traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.bench.load import sort_key
from autotune.export.accessors import goodput, is_speculative, level, throughput
from autotune.trial.records import TrialOutcome, TrialRecord


@dataclass(frozen=True)
class RegimeChoice:
    concurrency: int | str  # the level's key: a concurrency, or an open-loop key ("rate8")
    record: TrialRecord | None  # best eligible by output tok/s (open loop: by goodput) at this level
    tok_per_s: float | None
    globally_feasible: bool  # also satisfies every study constraint
    goodput: float | None = None


@dataclass(frozen=True)
class SpecComparison:
    concurrency: int
    spec: TrialRecord | None  # best eligible speculative config at this level
    spec_tok_per_s: float | None
    plain: TrialRecord | None  # best eligible non-speculative config
    plain_tok_per_s: float | None

    @property
    def comparable(self) -> bool:
        return self.spec_tok_per_s is not None and self.plain_tok_per_s is not None

    @property
    def spec_wins(self) -> bool | None:
        if self.spec_tok_per_s is None or self.plain_tok_per_s is None:
            return None
        return self.spec_tok_per_s > self.plain_tok_per_s

    @property
    def ratio(self) -> float | None:
        """Speculative over non-speculative throughput."""
        if self.spec_tok_per_s is None or not self.plain_tok_per_s:
            return None
        return self.spec_tok_per_s / self.plain_tok_per_s


@dataclass(frozen=True)
class Crossover:
    comparisons: tuple[SpecComparison, ...]  # ascending concurrency
    stops_winning_at: int | None  # first level where speculation loses after winning at a lower level
    last_spec_win: int | None  # the level just below that flip
    summary: str


def constraint_level(key: str, load_levels: Sequence[int]) -> int | str | None:
    """The level a ``metric@level`` key names (a concurrency, or an open-loop key); None when it names none (applies
    at every level)."""
    if "@" not in key:
        return None
    tag = key.rsplit("@", 1)[1].strip().lower()
    if tag == "max":
        return max(load_levels)
    if tag == "min":
        return min(load_levels)
    try:
        return int(tag)
    except ValueError:
        return tag or None


def eligible_at(record: TrialRecord, concurrency: int | str, load_levels: Sequence[int]) -> bool:
    if record.outcome is not TrialOutcome.COMPLETE:
        return False
    lv = level(record, concurrency)
    if lv is None or lv.requests <= 0 or lv.failed > 0:
        return False
    for key, value in record.constraints.items():
        at = constraint_level(key, load_levels)
        if at is not None and at != concurrency:
            continue
        if not isinstance(value, (int, float)) or math.isnan(value) or value > 0:
            return False
    return True


def _best_at(
    records: Sequence[TrialRecord], c: int | str, levels: Sequence[int]
) -> tuple[TrialRecord | None, float | None]:
    """The best eligible record at level ``c`` and its output tok/s: by tok/s at a concurrency; by (goodput, tok/s)
    at an open-loop level."""
    best: TrialRecord | None = None
    best_rank: tuple[float, float] | None = None
    best_v: float | None = None
    for rec in sorted(records, key=lambda r: r.number):
        v = throughput(rec, c)
        if v is None or not eligible_at(rec, c, levels):
            continue
        g = goodput(rec, c) if isinstance(c, str) else None
        rank = (g if g is not None else v, v)
        if best_rank is None or rank > best_rank:
            best, best_rank, best_v = rec, rank, v
    return best, best_v


def regime_choices(
    records: Sequence[TrialRecord], load_levels: Sequence[int], open_levels: Sequence[str] = ()
) -> tuple[RegimeChoice, ...]:
    """The best config at each concurrency of ``load_levels`` and each open-loop level of ``open_levels``."""
    out = []
    keys: list[int | str] = [*load_levels, *open_levels]
    for c in sorted(keys, key=sort_key):
        rec, v = _best_at(records, c, load_levels)
        out.append(
            RegimeChoice(
                concurrency=c,
                record=rec,
                tok_per_s=v,
                globally_feasible=bool(rec and rec.feasible),
                goodput=goodput(rec, c) if rec is not None else None,
            )
        )
    return tuple(out)


def open_level_keys(records: Sequence[TrialRecord]) -> tuple[str, ...]:
    """The open-loop levels (``"rate8"``...) the records measured, in ``sort_key`` order."""
    keys = {lv.load for r in records if r.bench is not None for lv in r.bench.levels if lv.load}
    return tuple(sorted(keys, key=sort_key))


def crossover(records: Sequence[TrialRecord], load_levels: Sequence[int]) -> Crossover:
    spec = [r for r in records if is_speculative(r)]
    plain = [r for r in records if not is_speculative(r)]
    comps = []
    for c in sorted(load_levels):
        s, sv = _best_at(spec, c, load_levels)
        p, pv = _best_at(plain, c, load_levels)
        comps.append(SpecComparison(concurrency=c, spec=s, spec_tok_per_s=sv, plain=p, plain_tok_per_s=pv))
    stops_at: int | None = None
    last_win: int | None = None
    prev_win: int | None = None
    for comp in comps:
        if comp.spec_wins is True:
            prev_win = comp.concurrency
        elif comp.spec_wins is False and prev_win is not None:
            stops_at, last_win = comp.concurrency, prev_win
            break
    return Crossover(tuple(comps), stops_at, last_win, _summary(comps, stops_at, last_win, bool(spec), bool(plain)))


def _summary(
    comps: Sequence[SpecComparison], stops_at: int | None, last_win: int | None, any_spec: bool, any_plain: bool
) -> str:
    if not any_spec:
        return "No speculative trial in this study: nothing to compare speculation against."
    if not any_plain:
        return "No non-speculative trial in this study: add 'off' to the algorithm choices to compare."
    comparable = [c for c in comps if c.comparable]
    if not comparable:
        return "No load level has both an eligible speculative and an eligible non-speculative config."
    wins = [c.concurrency for c in comparable if c.spec_wins]
    if stops_at is not None:
        text = (
            f"Speculation wins up to concurrency {last_win}; from concurrency {stops_at} the best "
            "non-speculative config is faster."
        )
        later_wins = [c for c in wins if c > stops_at]
        if later_wins:
            text += f" (Speculation wins again at concurrency {', '.join(map(str, later_wins))}.)"
        return text
    levels = ", ".join(str(c.concurrency) for c in comparable)
    if len(wins) == len(comparable):
        return f"Speculation wins at every compared load level ({levels}): no crossover measured."
    if not wins:
        return f"Speculation never beats no speculation at the compared load levels ({levels})."
    return f"No speculation wins at low concurrency; speculation wins at concurrency {', '.join(map(str, wins))}."
