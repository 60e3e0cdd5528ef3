"""The best speculative setting per load: from every trial's per-level results, which speculative configuration (or
none) to run at each measured load level, merged into running-batch ranges. Pure.

At each load level (the benchmark's concurrency, which bounds the running batch) the best eligible speculative trial is
compared with the best eligible non-speculative one (``regimes.eligible_at``), each by its mean over its launches and
compared by the export's one rule (``autotune.export.evidence``), as the regimes and speculation on vs off are: a
difference the noise cannot separate is stated as a tie. Speculation is chosen only where it is faster, and a trial the
output-equality gate failed (``blocked``) is never chosen. Adjacent levels with the same choice form one range; a range's bounds are measured levels, and where between two levels the choice flips was not
measured. Trials with ``--speculative-adaptive`` (SGLang adjusts the steps at run time) are candidates like any other,
and each level also compares the best adaptive trial with the best static speculative one. A range's flags are its
trial's speculative flags and the running cap and CUDA-graph ceiling it ran with, less the benchmark-only settings
(``autotune.export.study_only``), as launch.sh does.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from autotune.engines.sglang_rules import GRAPH_CEILINGS, MAX_RUNNING
from autotune.export.accessors import flag_value, is_set, is_speculative, level
from autotune.export.evidence import Evidence, ranked
from autotune.export.regimes import eligible_at
from autotune.export.study_only import study_only_settings
from autotune.trial.records import TrialRecord

ADAPTIVE_FLAG = "speculative-adaptive"
CAP_FLAGS = (MAX_RUNNING, *GRAPH_CEILINGS)


@dataclass(frozen=True)
class LevelChoice:
    concurrency: int
    choice: int | None  # the trial to run here; None when no trial is eligible
    speculative: bool  # the choice speculates
    plain: int | None  # best non-speculative trial, its tok/s
    plain_tok_per_s: float | None
    spec: int | None  # best speculative trial the gate did not block, its tok/s, accept length here
    spec_tok_per_s: float | None
    spec_accept_length: float | None
    accept_source: str | None
    adaptive: int | None  # best adaptive trial and best static speculative trial, their tok/s
    adaptive_tok_per_s: float | None
    static_tok_per_s: float | None
    tie: bool = False  # the noise cannot separate the best speculative trial from the best non-speculative one

    @property
    def ratio(self) -> float | None:
        if self.spec_tok_per_s is None or not self.plain_tok_per_s:
            return None
        return self.spec_tok_per_s / self.plain_tok_per_s


@dataclass(frozen=True)
class Range:
    low: int  # measured levels, inclusive
    high: int
    trial: int | None
    speculative: bool
    flags: dict  # the chosen trial's speculative flags ({} when off)


@dataclass(frozen=True)
class Schedule:
    levels: tuple[LevelChoice, ...]
    ranges: tuple[Range, ...]
    blocked: tuple[int, ...]  # speculative trials the output-equality gate set aside
    any_adaptive: bool
    note: str


def is_adaptive(rec: TrialRecord) -> bool:
    return is_speculative(rec) and is_set(flag_value(rec, ADAPTIVE_FLAG))


def spec_flags(rec: TrialRecord, study_only: Mapping[str, str] | None = None) -> dict:
    """The trial's speculative flags to run, with the running cap and CUDA-graph ceiling it set (``CAP_FLAGS``:
    without them SGLang caps a speculative server at 48 running requests), without its benchmark-only ones
    (``study_only``: the study's marks)."""
    keep = {k: v for k, v in rec.flags.items() if k.startswith("speculative-") or k in CAP_FLAGS} if rec else {}
    flags = {k: v for k, v in keep.items() if is_set(v)}
    gone = {s.name for s in study_only_settings(flags, {}, study_only or {})}
    return {k: v for k, v in flags.items() if k not in gone}


def _best(
    records: Sequence[TrialRecord], c: int, levels: Sequence[int], ev: Evidence
) -> tuple[TrialRecord | None, float | None]:
    """The eligible record with the highest mean output tok/s over its launches at ``c``, and that mean."""
    lead, _ = ranked(ev, [r.number for r in records if eligible_at(r, c, levels)], c, "maximize")
    if lead is None:
        return None, None
    return next(r for r in records if r.number == lead.number), lead.mean


def _accept(rec: TrialRecord | None, c: int) -> float | None:
    lv = level(rec, c) if rec is not None else None
    if lv is None:
        return None
    return lv.server_accept_length if lv.server_accept_length is not None else lv.accept_length


def speculation_schedule(
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    blocked: Collection[int] = (),
    evidence: Evidence | None = None,
    study_only: Mapping[str, str] | None = None,
) -> Schedule:
    levels = sorted(load_levels)
    ev = evidence if evidence is not None else Evidence(records, None)
    spec = [r for r in records if is_speculative(r) and r.number not in blocked]
    plain = [r for r in records if not is_speculative(r)]
    adaptive = [r for r in spec if is_adaptive(r)]
    static = [r for r in spec if not is_adaptive(r)]
    rows = []
    for c in levels:
        p, pv = _best(plain, c, levels, ev)
        s, sv = _best(spec, c, levels, ev)
        a, av = _best(adaptive, c, levels, ev)
        _, stv = _best(static, c, levels, ev)
        use_spec = s is not None and (pv is None or (sv is not None and sv > pv))
        ss, ps = (ev.samples(s.number, c), ev.samples(p.number, c)) if s is not None and p is not None else (None, None)
        tie = ss is not None and ps is not None and not ev.compare(ss, ps, "maximize", c).separable
        choice = s if use_spec else p
        rows.append(
            LevelChoice(
                c,
                choice.number if choice else None,
                use_spec,
                p.number if p else None,
                pv,
                s.number if s else None,
                sv,
                _accept(s, c),
                s.accept_source if s else None,
                a.number if a else None,
                av,
                stv,
                tie,
            )
        )
    by_number = {r.number: r for r in records}
    ranges: list[Range] = []
    for row in rows:
        if ranges and ranges[-1].trial == row.choice:
            ranges[-1] = Range(ranges[-1].low, row.concurrency, row.choice, row.speculative, ranges[-1].flags)
        else:
            rec = by_number.get(row.choice) if row.choice is not None else None
            ranges.append(
                Range(
                    row.concurrency,
                    row.concurrency,
                    row.choice,
                    row.speculative,
                    spec_flags(rec, study_only) if rec is not None and row.speculative else {},
                )
            )
    return Schedule(
        tuple(rows), tuple(ranges), tuple(sorted(blocked)), bool(adaptive), _note(rows, spec, plain, adaptive, blocked)
    )


def _note(
    rows: Sequence[LevelChoice],
    spec: Sequence[TrialRecord],
    plain: Sequence[TrialRecord],
    adaptive: Sequence[TrialRecord],
    blocked: Collection[int],
) -> str:
    parts = []
    if not spec:
        parts.append(
            "no speculative trial is a candidate"
            + (
                f" (the output-equality gate set aside trial(s) {', '.join(map(str, sorted(blocked)))})"
                if blocked
                else ""
            )
        )
    if not plain:
        parts.append("no non-speculative trial: speculation cannot be compared with off")
    on = [r.concurrency for r in rows if r.speculative]
    if spec and plain:
        parts.append(
            f"speculation is chosen at load level(s) {', '.join(map(str, on))}"
            if on
            else "speculation loses at every measured load level: off everywhere"
        )
    parts.append(
        "adaptive speculation was a candidate (--speculative-adaptive)"
        if adaptive
        else "no trial ran adaptive speculation (--speculative-adaptive): none is compared"
    )
    return "; ".join(parts) + "."


def schedule_document(s: Schedule) -> dict:
    return {
        "what": "the best speculative setting per load level (benchmark concurrency); off where speculation loses",
        "levels": [{**row.__dict__, "ratio": row.ratio} for row in s.levels],
        "ranges": [
            {"from_level": r.low, "to_level": r.high, "trial": r.trial, "speculative": r.speculative, "flags": r.flags}
            for r in s.ranges
        ],
        "blocked_by_output_gate": list(s.blocked),
        "adaptive_candidates": s.any_adaptive,
        "note": s.note,
        "bounds": "measured levels; where the choice flips between two of them was not measured",
    }


def schedule_table(s: Schedule) -> list[str]:
    """The report's table: one row per measured level."""

    def f(v: float | None, nd: int = 0) -> str:
        return "-" if v is None else f"{v:,.{nd}f}"

    out = [
        "| load level | run | best off (trial, tok/s) | best speculative (trial, tok/s, accept length) | ratio "
        "| adaptive vs static speculative tok/s |",
        "| ---: | --- | --- | --- | ---: | --- |",
    ]
    for r in s.levels:
        run = (
            "-" if r.choice is None else (f"speculate: trial {r.choice}" if r.speculative else f"off: trial {r.choice}")
        )
        spec = (
            "-"
            if r.spec is None
            else (f"{r.spec}, {f(r.spec_tok_per_s)}, {f(r.spec_accept_length, 2)} ({r.accept_source or '?'})")
        )
        adapt = "-" if r.adaptive is None else f"{f(r.adaptive_tok_per_s)} vs {f(r.static_tok_per_s)}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.2f}x" + (" (tie: within the noise)" if r.tie else "")
        out.append(
            f"| {r.concurrency} | {run} | {'-' if r.plain is None else f'{r.plain}, {f(r.plain_tok_per_s)}'} "
            f"| {spec} | {ratio} | {adapt} |"
        )
    return out
