"""Hand-written SVG charts (no plotting library): a line chart and a scatter chart with a frontier. Pure text."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 820, 500
LEFT, RIGHT, BOTTOM = 80, 210, 60
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
MUTED = "#b8b8b8"


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]
    color: str = MUTED
    width: float = 1.0
    in_legend: bool = False


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    label: str
    color: str = MUTED
    hollow: bool = False


def nice_ticks(lo: float, hi: float, count: int = 5) -> tuple[float, ...]:
    """Round tick values (1/2/5 x 10^k) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v < hi + step * 0.999:
        ticks.append(round(v, 10))
        v += step
    return tuple(ticks)


def _label(v: float) -> str:
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:g}"


class _Canvas:
    def __init__(self, title: str, subtitle: str) -> None:
        self.sub_lines = textwrap.wrap(subtitle, 120)[:3]
        self.top = 40 + 14 * len(self.sub_lines) + 10
        self.parts: list[str] = [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
            f'<text x="{LEFT}" y="24" font-size="16" font-weight="bold">{escape(title)}</text>',
        ]
        for i, line in enumerate(self.sub_lines):
            self.parts.append(f'<text x="{LEFT}" y="{42 + 14 * i}" font-size="11" fill="#444">{escape(line)}</text>')
        self.x0, self.x1 = LEFT, WIDTH - RIGHT
        self.y0, self.y1 = HEIGHT - BOTTOM, self.top

    def add(self, element: str) -> None:
        self.parts.append(element)

    def text(self, x: float, y: float, s: str, **attrs: str) -> None:
        extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(s)}</text>')

    def axes(self, x_label: str, y_label: str) -> None:
        self.add(f'<line x1="{self.x0}" y1="{self.y0}" x2="{self.x1}" y2="{self.y0}" stroke="black"/>')
        self.add(f'<line x1="{self.x0}" y1="{self.y0}" x2="{self.x0}" y2="{self.y1}" stroke="black"/>')
        self.text((self.x0 + self.x1) / 2, HEIGHT - 18, x_label, text_anchor="middle")
        cy = (self.y0 + self.y1) / 2
        self.add(
            f'<text x="18" y="{cy:.1f}" text-anchor="middle" transform="rotate(-90 18 {cy:.1f})">{escape(y_label)}</text>'
        )

    def legend(self, entries: Sequence[tuple[str, str]]) -> None:
        x, y = self.x1 + 16, self.y1 + 8
        for i, (label, color) in enumerate(entries[:16]):
            yy = y + 18 * i
            self.add(f'<rect x="{x}" y="{yy - 9}" width="12" height="12" fill="{color}"/>')
            self.text(x + 18, yy + 1, label[:30])

    def empty(self, why: str) -> None:
        self.text((self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2, why, text_anchor="middle", fill="#888")

    def done(self) -> str:
        return "\n".join([*self.parts, "</svg>"]) + "\n"


def _linear(lo: float, hi: float, p0: float, p1: float) -> Callable[[float], float]:
    span = (hi - lo) or 1.0
    return lambda v: p0 + (v - lo) / span * (p1 - p0)


def line_chart(
    *,
    title: str,
    subtitle: str,
    x_label: str,
    y_label: str,
    series: Sequence[Series],
    x_ticks: Sequence[float],
    x_markers: Sequence[tuple[float, str]] = (),
) -> str:
    """Lines over a log2 x axis (concurrency); y from 0. Muted series are drawn first, legend series on top.

    ``x_markers`` are labeled vertical dashed lines (e.g. where speculation stops winning)."""
    cv = _Canvas(title, subtitle)
    cv.axes(x_label, y_label)
    pts = [p for s in series for p in s.points if p[0] > 0 and math.isfinite(p[1])]
    if not pts or not x_ticks:
        cv.empty("no completed trial to plot")
        return cv.done()
    lx = [math.log2(t) for t in x_ticks if t > 0] + [math.log2(p[0]) for p in pts]
    xlo, xhi = min(lx), max(lx)
    if xhi == xlo:
        xlo, xhi = xlo - 1, xhi + 1
    yt = nice_ticks(0.0, max(p[1] for p in pts) * 1.05 or 1.0)
    sx = _linear(xlo, xhi, cv.x0 + 20, cv.x1 - 20)
    sy = _linear(0.0, yt[-1], cv.y0, cv.y1)
    for t in x_ticks:
        x = sx(math.log2(t))
        cv.add(f'<line x1="{x:.1f}" y1="{cv.y0}" x2="{x:.1f}" y2="{cv.y0 + 5}" stroke="black"/>')
        cv.text(x, cv.y0 + 18, _label(t), text_anchor="middle")
    _y_grid(cv, yt, sy)
    for at, label in x_markers:
        if at <= 0:
            continue
        x = sx(math.log2(at))
        cv.add(f'<line x1="{x:.1f}" y1="{cv.y0}" x2="{x:.1f}" y2="{cv.y1}" stroke="#555" stroke-dasharray="4,4"/>')
        cv.text(x + 4, cv.y1 + 12, label, font_size="10", fill="#555")
    for s in sorted(series, key=lambda s: s.in_legend):
        xy = [(sx(math.log2(x)), sy(y)) for x, y in s.points if x > 0 and math.isfinite(y)]
        if not xy:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        cv.add(f'<polyline points="{path}" fill="none" stroke="{s.color}" stroke-width="{s.width}"/>')
        for x, y in xy:
            cv.add(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{2.5 if s.in_legend else 1.5}" fill="{s.color}"/>')
    cv.legend([(s.label, s.color) for s in series if s.in_legend])
    return cv.done()


def scatter_chart(
    *,
    title: str,
    subtitle: str,
    x_label: str,
    y_label: str,
    dots: Sequence[Dot],
    frontier: Sequence[tuple[float, float]],
    legend: Sequence[tuple[str, str]],
) -> str:
    """Dots (labeled) with the frontier drawn as a line through its points, axes from 0."""
    cv = _Canvas(title, subtitle)
    cv.axes(x_label, y_label)
    finite = [d for d in dots if math.isfinite(d.x) and math.isfinite(d.y)]
    if not finite:
        cv.empty("no feasible trial with both metrics")
        return cv.done()
    xt = nice_ticks(0.0, max(d.x for d in finite) * 1.05 or 1.0)
    yt = nice_ticks(0.0, max(d.y for d in finite) * 1.05 or 1.0)
    sx = _linear(0.0, xt[-1], cv.x0, cv.x1)
    sy = _linear(0.0, yt[-1], cv.y0, cv.y1)
    for t in xt:
        x = sx(t)
        cv.add(f'<line x1="{x:.1f}" y1="{cv.y0}" x2="{x:.1f}" y2="{cv.y0 + 5}" stroke="black"/>')
        cv.text(x, cv.y0 + 18, _label(t), text_anchor="middle")
    _y_grid(cv, yt, sy)
    if len(frontier) > 1:
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(frontier))
        cv.add(
            f'<polyline points="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5" stroke-dasharray="5,3"/>'
        )
    for d in sorted(finite, key=lambda d: d.color != MUTED):
        fill = "white" if d.hollow else d.color
        cx, cy = sx(d.x), sy(d.y)
        cv.add(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{fill}" stroke="{d.color}" stroke-width="1.5"/>')
        cv.text(cx + 6, cy - 6, d.label, font_size="10", fill="#333")
    cv.legend(legend)
    return cv.done()


def _y_grid(cv: _Canvas, ticks: Sequence[float], sy: Callable[[float], float]) -> None:
    for t in ticks:
        y = sy(t)
        cv.add(f'<line x1="{cv.x0}" y1="{y:.1f}" x2="{cv.x1}" y2="{y:.1f}" stroke="#eee"/>')
        cv.text(cv.x0 - 6, y + 4, _label(t), text_anchor="end")
