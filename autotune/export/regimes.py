"""Per-traffic-regime recommendations: the best config at each load level, and where speculation flips. Pure.

Rate and trace levels (open loop) are regimes too: there every config is offered the same traffic, so the best is the
one with the highest goodput (requests/s meeting every SLO; output tok/s when the study has no SLO). A trial is
*eligible* at a level when it completed, that level was measured with no failed request, and it meets every constraint
of the study: a regime never recommends a config the study's constraints rule out (the regime says none is eligible
instead). Configs are ranked and compared by ``autotune.export.evidence`` (relaunch means where there are relaunches,
one test for every statement); a difference the noise cannot separate is a tie. At the primary objective's level the
export's own winner leads, so the regime table and the recommendation never disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotune.bench.load import sort_key
from autotune.export.accessors import goodput, is_speculative, level, throughput
from autotune.export.evidence import Difference, Evidence, ranked
from autotune.trial.records import TrialOutcome, TrialRecord


@dataclass(frozen=True)
class RegimeChoice:
    concurrency: int | str  # the level's key: a concurrency, or an open-loop key ("rate8")
    record: TrialRecord | None  # best eligible at this level (its mean over its launches; open loop: by goodput)
    tok_per_s: float | None
    globally_feasible: bool  # also satisfies every study constraint (always, for an eligible record)
    tied: tuple[int, ...] = ()  # eligible configs the noise cannot separate from it
    launches: int = 0  # the launches behind tok_per_s
    goodput: float | None = None


@dataclass(frozen=True)
class SpecComparison:
    concurrency: int
    spec: TrialRecord | None  # best eligible speculative config at this level
    spec_tok_per_s: float | None
    plain: TrialRecord | None  # best eligible non-speculative config
    plain_tok_per_s: float | None
    difference: Difference | None = None  # speculative against non-speculative (evidence.compare)

    @property
    def comparable(self) -> bool:
        return self.spec_tok_per_s is not None and self.plain_tok_per_s is not None

    @property
    def tie(self) -> bool:
        return self.comparable and self.difference is not None and not self.difference.separable

    @property
    def spec_wins(self) -> bool | None:
        """True / False where the noise separates the two; None where they tie or one is missing."""
        if not self.comparable or self.difference is None or not self.difference.separable:
            return None
        return self.difference.gain_pct > 0

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return "-"
        if self.tie:
            return "tie"
        return "speculation" if self.spec_wins else "no speculation"

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


def eligible_at(record: TrialRecord, concurrency: int | str, load_levels: Sequence[int]) -> bool:
    """Completed, the level measured with no failed request, and every study constraint met."""
    if record.outcome is not TrialOutcome.COMPLETE or not record.feasible:
        return False
    lv = level(record, concurrency)
    if lv is None or lv.requests <= 0 or lv.failed > 0:
        return False
    for value in record.constraints.values():
        if not isinstance(value, (int, float)) or math.isnan(value) or value > 0:
            return False
    return True


def _evidence(records: Sequence[TrialRecord], evidence: Evidence | None) -> Evidence:
    return evidence if evidence is not None else Evidence(records, None)


def _rank_metric(records: Sequence[TrialRecord], c: int | str) -> str:
    """Output tok/s at a concurrency; goodput at an open-loop level where the records measured it."""
    if isinstance(c, str) and any(goodput(r, c) is not None for r in records):
        return "goodput"
    return "output_tok_per_s"


def _best_at(
    records: Sequence[TrialRecord], c: int | str, levels: Sequence[int], ev: Evidence, first: int | None = None
) -> tuple[TrialRecord | None, float | None, tuple[int, ...], int]:
    """The best eligible record at level ``c``, its mean output tok/s, the configs tied with it and its launches."""
    eligible = [r.number for r in records if eligible_at(r, c, levels)]
    lead, tied = ranked(ev, eligible, c, "maximize", metric=_rank_metric(records, c), first=first)
    if lead is None:
        return None, None, (), 0
    rec = {r.number: r for r in records}[lead.number]
    tok = ev.samples(lead.number, c)
    return rec, (tok.mean if tok is not None else throughput(rec, c)), tied, len(lead.values)


def regime_choices(
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    evidence: Evidence | None = None,
    winner: tuple[int, int] | None = None,
    open_levels: Sequence[str] = (),
) -> tuple[RegimeChoice, ...]:
    """The best eligible config per concurrency of ``load_levels`` and per open-loop level of ``open_levels``;
    ``winner`` = (trial, concurrency): the export's winner leads at its objective's level where it is eligible there."""
    ev = _evidence(records, evidence)
    out = []
    keys: list[int | str] = [*load_levels, *open_levels]
    for c in sorted(keys, key=sort_key):
        first = winner[0] if winner is not None and winner[1] == c else None
        rec, v, tied, n = _best_at(records, c, load_levels, ev, first)
        out.append(
            RegimeChoice(
                concurrency=c,
                record=rec,
                tok_per_s=v,
                globally_feasible=bool(rec and rec.feasible),
                tied=tied,
                launches=n,
                goodput=goodput(rec, c) if rec is not None else None,
            )
        )
    return tuple(out)


def open_level_keys(records: Sequence[TrialRecord]) -> tuple[str, ...]:
    """The open-loop levels (``"rate8"``...) the records measured, in ``sort_key`` order."""
    keys = {lv.load for r in records if r.bench is not None for lv in r.bench.levels if lv.load}
    return tuple(sorted(keys, key=sort_key))


def crossover(
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    evidence: Evidence | None = None,
    winner: tuple[int, int] | None = None,
) -> Crossover:
    ev = _evidence(records, evidence)
    spec = [r for r in records if is_speculative(r)]
    plain = [r for r in records if not is_speculative(r)]
    comps = []
    for c in sorted(load_levels):
        first = winner[0] if winner is not None and winner[1] == c else None
        s, sv, _, _ = _best_at(spec, c, load_levels, ev, first if any(r.number == first for r in spec) else None)
        p, pv, _, _ = _best_at(plain, c, load_levels, ev, first if any(r.number == first for r in plain) else None)
        diff = None
        if s is not None and p is not None:
            a, b = ev.samples(s.number, c), ev.samples(p.number, c)
            if a is not None and b is not None:
                diff = ev.compare(a, b, "maximize", c)
        comps.append(
            SpecComparison(concurrency=c, spec=s, spec_tok_per_s=sv, plain=p, plain_tok_per_s=pv, difference=diff)
        )
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
    wins = [c.concurrency for c in comparable if c.spec_wins is True]
    losses = [c.concurrency for c in comparable if c.spec_wins is False]
    ties = [c.concurrency for c in comparable if c.tie]
    tie_text = f" Tie (within the noise) at concurrency {', '.join(map(str, ties))}." if ties else ""
    if stops_at is not None:
        text = (
            f"Speculation wins up to concurrency {last_win}; from concurrency {stops_at} the best "
            "non-speculative config is faster."
        )
        later_wins = [c for c in wins if c > stops_at]
        if later_wins:
            text += f" (Speculation wins again at concurrency {', '.join(map(str, later_wins))}.)"
        return text + tie_text
    levels = ", ".join(str(c.concurrency) for c in comparable)
    if len(ties) == len(comparable):
        return f"Speculation and no speculation tie (within the noise) at every compared load level ({levels})."
    if len(wins) == len(comparable):
        return f"Speculation wins at every compared load level ({levels}): no crossover measured."
    if not wins:
        lost = f" (no speculation wins at concurrency {', '.join(map(str, losses))})" if losses else ""
        return (
            f"Speculation never beats no speculation beyond the noise at the compared load levels ({levels}){lost}."
            + tie_text
        )
    if losses:
        return (
            f"No speculation wins at concurrency {', '.join(map(str, losses))}; speculation wins at concurrency "
            f"{', '.join(map(str, wins))}."
        ) + tie_text
    return f"Speculation wins at concurrency {', '.join(map(str, wins))}." + tie_text
