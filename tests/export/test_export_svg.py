"""SVG primitives: ticks, escaping, empty charts."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from autotune.export.svg import Dot, Series, line_chart, nice_ticks, scatter_chart


def test_nice_ticks_cover_range_with_round_steps():
    assert nice_ticks(0, 2370) == (0, 500, 1000, 1500, 2000, 2500)
    assert nice_ticks(0, 0.9) == (0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert nice_ticks(5, 5)[0] <= 5 <= nice_ticks(5, 5)[-1]


def test_text_is_escaped_and_empty_charts_are_valid():
    svg = line_chart(title="a<b & c", subtitle="x", x_label="c", y_label="y", series=[], x_ticks=[1, 8])
    root = ET.fromstring(svg)
    assert any(t.text == "a<b & c" for t in root.iter() if t.tag.endswith("text"))
    assert "no completed trial" in svg
    empty = scatter_chart(title="t", subtitle="s", x_label="x", y_label="y", dots=[], frontier=[], legend=[])
    assert "no feasible trial" in ET.tostring(ET.fromstring(empty), encoding="unicode")


def test_single_level_and_points_are_placed_inside_the_plot():
    svg = line_chart(
        title="t",
        subtitle="s",
        x_label="c",
        y_label="y",
        series=[Series("a", ((8.0, 100.0),), in_legend=True)],
        x_ticks=[8],
    )
    circles = [e for e in ET.fromstring(svg).iter() if e.tag.endswith("circle")]
    assert len(circles) == 1 and 80 <= float(circles[0].get("cx", -1)) <= 610
    dots = [Dot(10.0, 2000.0, "#0"), Dot(5.0, 1000.0, "#1", hollow=True)]
    svg2 = scatter_chart(
        title="t", subtitle="s", x_label="x", y_label="y", dots=dots, frontier=[(5, 1000), (10, 2000)], legend=[]
    )
    root = ET.fromstring(svg2)
    ys = sorted(float(e.get("cy", 0)) for e in root.iter() if e.tag.endswith("circle"))
    assert ys[0] < ys[1]  # higher throughput is drawn higher up
