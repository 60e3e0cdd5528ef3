"""The report's two charts, built from a StudyAnalysis with the SVG primitives."""

from __future__ import annotations

from autotune.export.analysis import StudyAnalysis
from autotune.export.metrics import speculative_algorithm, throughput
from autotune.export.svg import MUTED, PALETTE, Dot, Series, line_chart, scatter_chart
from autotune.records import TrialOutcome, TrialRecord

MAX_HIGHLIGHTS = len(PALETTE)


def _describe(rec: TrialRecord) -> str:
    algorithm = speculative_algorithm(rec)
    return f"#{rec.number} ({algorithm})" if algorithm else f"#{rec.number} (no spec)"


def _highlighted(analysis: StudyAnalysis) -> list[TrialRecord]:
    """The best trial, each regime's winner, and the best speculative / non-speculative per level, in that order."""
    picks: list[TrialRecord] = []
    candidates = [analysis.best.record, *(r.record for r in analysis.regimes)]
    for comp in analysis.crossover.comparisons:
        candidates += [comp.spec, comp.plain]
    for rec in candidates:
        if rec is not None and all(rec.number != p.number for p in picks):
            picks.append(rec)
    return picks[:MAX_HIGHLIGHTS]


def throughput_svg(analysis: StudyAnalysis) -> str:
    levels = analysis.load_levels
    picks = {r.number: i for i, r in enumerate(_highlighted(analysis))}
    series = []
    for rec in analysis.records:
        if rec.outcome is not TrialOutcome.COMPLETE:
            continue
        pts = tuple((float(c), v) for c in levels if (v := throughput(rec, c)) is not None)
        if rec.number in picks:
            label = _describe(rec) + (" best" if rec is analysis.best.record else "")
            color = PALETTE[picks[rec.number] % len(PALETTE)]
            series.append(Series(label, pts, color=color, width=2.5, in_legend=True))
        else:
            series.append(Series(f"#{rec.number}", pts))
    if len(series) > len(picks):
        series.append(Series("other completed trials", (), color=MUTED, in_legend=True))
    return line_chart(
        title=f"{analysis.study_name}: output throughput vs concurrency",
        subtitle=analysis.banner,
        x_label="concurrency (log scale)",
        y_label="output tok/s",
        series=series,
        x_ticks=[float(c) for c in levels],
        x_markers=_flip_marker(analysis),
    )


def _flip_marker(analysis: StudyAnalysis) -> list[tuple[float, str]]:
    at = analysis.crossover.stops_winning_at
    return [(float(at), f"speculation stops winning at {at}")] if at is not None else []


def pareto_svg(analysis: StudyAnalysis) -> str:
    front = analysis.pareto
    on_front = {p.number for p in front.front}
    best_number = analysis.best.record.number if analysis.best.record is not None else None
    dots = []
    for p in (*front.front, *front.dominated):
        color = PALETTE[0] if p.number in on_front else MUTED
        if p.number == best_number:
            color = PALETTE[1]
        dots.append(Dot(p.tpot_ms, p.peak_tok_per_s, f"#{p.number}", color=color, hollow=p.speculative))
    legend = [("Pareto set", PALETTE[0]), ("best (primary objective)", PALETTE[1]), ("dominated", MUTED)]
    return scatter_chart(
        title=f"{analysis.study_name}: Pareto set of feasible trials (hollow = speculative)",
        subtitle=analysis.banner,
        x_label=f"TPOT median at concurrency {front.latency_level} (ms, lower is better)",
        y_label=f"output tok/s at concurrency {front.peak_level}",
        dots=dots,
        frontier=[(p.tpot_ms, p.peak_tok_per_s) for p in front.front],
        legend=legend,
    )
