"""The report's two charts, drawn with matplotlib (object API, no pyplot state) and written as SVG.

Throughput vs concurrency: log-scale concurrency (levels spaced evenly, labelled as they are), throughput on a log
scale, and beside it each trial as a share of the best trial at that level, so a win at concurrency 1 is as visible
as one at the peak. Pareto set: its first two axes, the frontier as a step line, labels placed so they overlap
neither each other nor the points (``place_labels``).
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib import rcParams
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from autotune.export.accessors import speculative_algorithm, throughput
from autotune.export.analysis import StudyAnalysis
from autotune.export.pareto import Axis
from autotune.trial.records import TrialOutcome, TrialRecord

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
MUTED = "#b0b0b0"
MAX_HIGHLIGHTS = len(PALETTE)


def _describe(rec: TrialRecord) -> str:
    algorithm = speculative_algorithm(rec)
    return f"#{rec.number} ({algorithm})" if algorithm else f"#{rec.number} (no spec)"


def highlighted(analysis: StudyAnalysis) -> list[TrialRecord]:
    """The best trial, each regime's winner, and the best speculative / non-speculative per level, in that order."""
    picks: list[TrialRecord] = []
    candidates = [analysis.best.record, *(r.record for r in analysis.regimes)]
    for comp in analysis.crossover.comparisons:
        candidates += [comp.spec, comp.plain]
    for rec in candidates:
        if rec is not None and all(rec.number != p.number for p in picks):
            picks.append(rec)
    return picks[:MAX_HIGHLIGHTS]


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    with rcParams_context():
        fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buf.getvalue()


class rcParams_context:  # noqa: N801 - used like a function
    """Text stays text in the SVG (small, searchable) and ids are stable from run to run."""

    def __enter__(self) -> None:
        self.saved = {k: rcParams[k] for k in ("svg.fonttype", "svg.hashsalt")}
        rcParams["svg.fonttype"] = "none"
        rcParams["svg.hashsalt"] = "autotune"

    def __exit__(self, *exc: object) -> None:
        rcParams.update(self.saved)  # type: ignore[arg-type]  # matplotlib types the keys as a Literal of names; these came from rcParams


def _log_concurrency_axis(ax, levels: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator([float(c) for c in levels]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(c) for c in levels])
    lo, hi = min(levels), max(levels)
    ax.set_xlim(lo / 1.3, hi * 1.3)
    ax.set_xlabel("concurrency (log scale)")
    ax.grid(True, which="major", color="#e6e6e6", linewidth=0.8)


def throughput_svg(analysis: StudyAnalysis) -> str:
    levels = list(analysis.load_levels)
    picks = {r.number: i for i, r in enumerate(highlighted(analysis))}
    fig = Figure(figsize=(11, 5.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax_abs, ax_rel = fig.subplots(1, 2)
    complete = [r for r in analysis.records if r.outcome is TrialOutcome.COMPLETE]
    best_at = {c: max((v for r in complete if (v := throughput(r, c)) is not None), default=None) for c in levels}
    others_drawn = False
    for rec in sorted(complete, key=lambda r: r.number in picks):  # highlighted last, on top
        pts = [(c, v) for c in levels if (v := throughput(rec, c)) is not None and v > 0]
        if not pts:
            continue
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        rel = [100.0 * v / best_at[c] for c, v in pts if best_at[c]]  # type: ignore[operator]  # the filter drops a None best_at[c]; mypy does not narrow an indexed value
        if rec.number in picks:
            style = {
                "color": PALETTE[picks[rec.number] % len(PALETTE)],
                "linewidth": 2.2,
                "marker": "o",
                "markersize": 4,
                "zorder": 3,
                "label": _describe(rec) + (" best" if rec is analysis.best.record else ""),
            }
        else:
            style = {
                "color": MUTED,
                "linewidth": 0.8,
                "zorder": 1,
                "label": None if others_drawn else "other completed trials",
            }
            others_drawn = True
        ax_abs.plot(xs, ys, gid=f"trial-{rec.number}", **style)
        ax_rel.plot(xs[: len(rel)], rel, gid=f"trial-{rec.number}-relative", **{**style, "label": None})
    for ax in (ax_abs, ax_rel):
        _log_concurrency_axis(ax, levels)
        at = analysis.crossover.stops_winning_at
        if at is not None:
            ax.axvline(float(at), color="#555555", linestyle="--", linewidth=1)
            ax.annotate(
                f"speculation stops winning at {at}",
                (float(at), 0.0),
                xycoords=("data", "axes fraction"),
                xytext=(3, 4),
                textcoords="offset points",
                va="bottom",
                rotation=90,
                fontsize=8,
                color="#555555",
            )
    ax_abs.set_yscale("log")
    ax_abs.set_ylabel("output tok/s (log scale)")
    ax_abs.set_title("output throughput")
    ax_rel.set_ylabel("% of the best trial at that concurrency")
    ax_rel.set_title("relative to the best at each level")
    if picks or others_drawn:
        fig.legend(*ax_abs.get_legend_handles_labels(), fontsize=8, loc="outside lower center", ncols=4, frameon=False)
    fig.suptitle(_title(f"{analysis.study_name}: output throughput vs concurrency", analysis.banner), fontsize=9)
    return _svg(fig)


@dataclass(frozen=True)
class LabelBox:
    text: str
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, other: LabelBox) -> bool:
        return self.x0 < other.x1 and other.x0 < self.x1 and self.y0 < other.y1 and other.y0 < self.y1


# offsets (points) tried in turn: around the point, then farther out
_DIRECTIONS = ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1.4), (0, -1.4), (1.4, 0), (-1.4, 0))
_RINGS = (6.0, 14.0, 24.0, 36.0)


def place_labels(ax, points: Sequence[tuple[float, float, str]], marker_pt: float = 5.0) -> list[LabelBox]:
    """Annotate each (x, y, text) where its box overlaps no earlier label, no marker and stays inside the axes.

    A label with no free place within the outer ring is left off (the table below the chart lists every point).
    Returns the boxes (display coordinates) of the labels placed."""
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    scale = fig.dpi / 72.0
    markers = []
    for x, y, _ in points:
        px, py = ax.transData.transform((x, y))
        r = marker_pt * scale
        markers.append(LabelBox("", px - r, py - r, px + r, py + r))
    placed: list[LabelBox] = []
    for (x, y, text), own in zip(points, markers, strict=True):
        for ring in _RINGS:
            done = False
            for dx, dy in _DIRECTIONS:
                ann = ax.annotate(
                    text,
                    (x, y),
                    xytext=(dx * ring, dy * ring),
                    textcoords="offset points",
                    fontsize=8,
                    ha="left" if dx > 0 else "right" if dx < 0 else "center",
                    va="bottom" if dy > 0 else "top" if dy < 0 else "center",
                    arrowprops={"arrowstyle": "-", "color": "#888888", "lw": 0.6} if ring > 6 else None,
                )
                ann.set_in_layout(False)  # labels never move the axes they were placed against
                bb = ann.get_window_extent(renderer)
                box = LabelBox(text, bb.x0, bb.y0, bb.x1, bb.y1)
                inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
                clash = any(box.overlaps(o) for o in placed) or any(box.overlaps(m) for m in markers if m is not own)
                if inside and not clash:
                    placed.append(box)
                    done = True
                    break
                ann.remove()
            if done:
                break
    return placed


def pareto_figure(analysis: StudyAnalysis) -> tuple[Figure, list[LabelBox]]:
    front = analysis.pareto
    on_front = {p.number for p in front.front}
    best_number = analysis.best.record.number if analysis.best.record is not None else None
    fig = Figure(figsize=(8.5, 5.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    points = [*front.front, *front.dominated]
    xa, ya = front.axes[0], front.axes[1]  # the first two axes; a third or more is in pareto.json and the report
    for p in points:
        color = PALETTE[1] if p.number == best_number else PALETTE[0] if p.number in on_front else MUTED
        ax.scatter(
            [p.values[0]],
            [p.values[1]],
            s=36,
            gid=f"trial-{p.number}",
            zorder=3 if p.number in on_front else 2,
            facecolors="white" if p.speculative else color,
            edgecolors=color,
            linewidths=1.6,
        )
    if front.front and len(front.axes) == 2:
        xs = [p.values[0] for p in front.front]
        ys = [p.values[1] for p in front.front]
        ax.step(xs, ys, where="post", color=PALETTE[0], linewidth=1, alpha=0.6, zorder=1)
    ax.set_xlabel(f"{xa.label} ({_better(xa)})")
    ax.set_ylabel(f"{ya.label} ({_better(ya)})")
    ax.grid(True, color="#e6e6e6", linewidth=0.8)
    if points:
        xs_all = [p.values[0] for p in points]
        ys_all = [p.values[1] for p in points]
        _pad(ax, xs_all, ys_all)
    ax.scatter([], [], s=36, color=PALETTE[0], label="Pareto set")
    ax.scatter([], [], s=36, color=PALETTE[1], label="best (primary objective)")
    ax.scatter([], [], s=36, color=MUTED, label="dominated")
    ax.scatter([], [], s=36, facecolors="white", edgecolors="#444444", label="hollow: speculative")
    fig.legend(fontsize=8, loc="outside lower center", ncols=4, frameon=False)
    fig.suptitle(_title(f"{analysis.study_name}: Pareto set of feasible trials", analysis.banner), fontsize=9)
    fig.draw_without_rendering()  # the layout is final before labels are placed against it
    labelled = sorted(front.front, key=lambda p: p.number != best_number)  # stable: then the front's order
    boxes = place_labels(ax, [(p.values[0], p.values[1], f"#{p.number}") for p in labelled])
    return fig, boxes


def _better(axis: Axis) -> str:
    return "higher is better" if axis.objective.direction == "maximize" else "lower is better"


def _title(head: str, banner: str) -> str:
    return head + "\n" + "\n".join(textwrap.wrap(banner, 120))


def _pad(ax, xs: Sequence[float], ys: Sequence[float]) -> None:
    """Axis limits around the points with room for labels (a single point gets a +-10% window)."""
    for values, setter in ((xs, ax.set_xlim), (ys, ax.set_ylim)):
        lo, hi = min(values), max(values)
        span = hi - lo if hi > lo else (abs(hi) * 0.2 or 1.0)
        if not math.isfinite(span):
            continue
        setter(lo - 0.12 * span, hi + 0.12 * span)


def pareto_svg(analysis: StudyAnalysis) -> str:
    fig, _ = pareto_figure(analysis)
    return _svg(fig)
