"""``python -m autotune.report``: best/ re-rendered from the records alone, a self-contained well-formed report.html
with its charts inline, --json for scripts, and Pareto labels that never overlap."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from autotune.export.charts import place_labels
from autotune.export.estimates import write_estimates
from autotune.report.__main__ import main
from autotune.trial.store import StudyStore


def _study_dir(tmp_path: Path, records, objectives, levels) -> Path:  # type: ignore[no-untyped-def]
    root = tmp_path / "demo"
    store = StudyStore(root)
    store.ensure()
    for rec in records:
        store.append(rec)
    objs = [{"metric": o.metric, "level": o.level, "direction": o.direction} for o in objectives]
    store.write_json(
        "study.json",
        {
            "name": "demo",
            "objectives": objs,
            "plan": {"concurrencies": list(levels)},
            "server": {"study_only": {}},
            "trials": len(records),
        },
    )
    return root


def test_report_exports_what_the_study_ranked_by_the_model(tmp_path, records, objectives, levels, capsys) -> None:  # type: ignore[no-untyped-def]
    """A study's model estimates (``model_estimates.json``, written by its export step) rank the rendered export and
    the printed table alike; estimates fitted to other trials are not read."""
    root = _study_dir(tmp_path, records, objectives, levels)
    feasible = [r.number for r in records if r.feasible]
    favoured = feasible[-1]
    assert favoured != 0  # not the measured best (trial 0, the test above)
    write_estimates(root, {n: (1e9 if n == favoured else 1.0) for n in feasible}, records)
    assert main([str(root)]) == 0
    assert f"* best: trial {favoured} (" in capsys.readouterr().out
    assert json.loads((root / "best" / "best.json").read_text())["decided_by"] == "model_estimate"
    write_estimates(root, {favoured: 1e9}, records[:-1])
    assert main([str(root)]) == 0
    assert "* best: trial 0 (" in capsys.readouterr().out


def test_report_keeps_the_banner_of_the_export_it_renders_again(tmp_path, records, objectives, levels) -> None:  # type: ignore[no-untyped-def]
    """An interrupted study's export says so (INTERRUPTED: partial results); re-rendering it used to drop the banner,
    so the same partial results read as a finished study's."""
    from autotune.export import export_study

    root = _study_dir(tmp_path, records, objectives, levels)
    banner = "INTERRUPTED by Ctrl-C: 3 of 12 trials done; these results are partial. Rerun to resume."
    export_study(root, study_name="demo", objectives=objectives, records=records, load_levels=levels, note=banner)
    assert main([str(root), "--quiet"]) == 0
    assert json.loads((root / "best" / "best.json").read_text())["note"] == banner
    assert (root / "best" / "report.md").read_text().startswith(f"> **{banner}**")


class _Balance(HTMLParser):
    VOID = {"meta", "img", "br", "hr", "input", "link"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [
            v or "" for k, v in attrs if k in ("src", "href") or (k == "xlink:href" and not (v or "").startswith("#"))
        ]
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.refs += [
            v or "" for k, v in attrs if k in ("src", "href") or (k == "xlink:href" and not (v or "").startswith("#"))
        ]

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def test_report_rerenders_best_from_the_records(tmp_path, records, objectives, levels, capsys) -> None:  # type: ignore[no-untyped-def]
    root = _study_dir(tmp_path, records, objectives, levels)
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "* best: trial 0" in out and "report.html" in out
    best = root / "best"
    first = {p.name: p.read_text() for p in best.iterdir() if p.name not in ("report.html",)}
    assert {"launch.sh", "serve_config.yaml", "best.json", "report.md", "pareto.svg"} <= set(first)

    for p in best.iterdir():  # lost or stale: the records are enough to get it back, the same
        p.unlink()
    assert main([str(root), "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    again = {p.name: p.read_text() for p in best.iterdir() if p.name not in ("report.html",)}
    assert again == first


def test_report_html_is_self_contained_and_well_formed(tmp_path, records, objectives, levels) -> None:  # type: ignore[no-untyped-def]
    root = _study_dir(tmp_path, records, objectives, levels)
    assert main([str(root), "--quiet"]) == 0
    page = (root / "best" / "report.html").read_text()
    doc = ET.fromstring(page.split("\n", 1)[1])  # well-formed markup (after the HTML5 doctype)
    svgs = [e for e in doc.iter() if e.tag == "{http://www.w3.org/2000/svg}svg"]
    assert len(svgs) == 2, "both charts inline as SVG"
    parser = _Balance()
    parser.feed(page)
    assert parser.stack == [], parser.stack  # every element closed, in order
    assert parser.refs == [], f"the page references outside files: {parser.refs}"
    assert "<img" not in page and "not embedded" not in page
    text = "".join(doc.itertext())
    assert "Engine: SIMULATED" in text and "Recommendation" in text and "All trials" in text
    assert re.search(r"<table>.*<th>trial</th>", page, re.S)


def test_report_json_and_errors(tmp_path, records, objectives, levels, capsys) -> None:  # type: ignore[no-untyped-def]
    root = _study_dir(tmp_path, records, objectives, levels)
    assert main([str(root), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["study"] == "demo" and doc["best"]["number"] == 0 and doc["trials"]["total"] == len(records)
    assert doc["trials"]["failures_by_kind"] and "report.html" in doc["files"] and doc["simulated"] is True

    assert main([str(tmp_path / "nothing-here")]) == 2
    assert "not a study directory" in capsys.readouterr().err


def test_pareto_labels_never_overlap_each_other_or_the_points() -> None:
    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    # a crowded corner: 14 points within 2% of each other, plus two far ones
    pts = [(10.0 + 0.03 * (i % 5), 1000.0 + 4.0 * (i // 5) + (i % 3), f"#{i}") for i in range(14)]
    pts += [(5.0, 600.0, "#20"), (14.0, 1100.0, "#21")]
    ax.scatter([p[0] for p in pts], [p[1] for p in pts])
    ax.set_xlim(4, 15)
    ax.set_ylim(550, 1150)
    boxes = place_labels(ax, pts)
    assert len(boxes) >= 8, "most labels found a free place"
    assert {b.text for b in boxes} >= {"#20", "#21"}
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
    centers = [ax.transData.transform((x, y)) for x, y, _ in pts]
    for box in boxes:
        assert not any(box.x0 < cx < box.x1 and box.y0 < cy < box.y1 for cx, cy in centers), box


@pytest.mark.parametrize("cwd_is_elsewhere", [True])
def test_default_space_works_from_any_directory(tmp_path, monkeypatch, capsys, cwd_is_elsewhere) -> None:  # type: ignore[no-untyped-def]
    from autotune.search import main as search_main

    monkeypatch.chdir(tmp_path)
    assert search_main(["--validate-only"]) == 0
    assert "valid study 'smoke'" in capsys.readouterr().out
    assert search_main(["--space", "speculative", "--validate-only"]) == 0
    assert search_main(["--space", "search_spaces/nccl.yaml", "--validate-only"]) == 0
    assert search_main(["--space", "no-such-space", "--validate-only"]) == 2
    assert "smoke" in capsys.readouterr().err  # the error names the shipped spaces


BROWSERS = ("chromium-headless-shell", "chromium", "google-chrome")


def test_report_html_opens_in_a_headless_browser(tmp_path, records, objectives, levels) -> None:  # type: ignore[no-untyped-def]
    """The page as a real browser parses it: both charts are SVG elements of the DOM, and it renders."""
    browser = next((b for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        pytest.skip(
            "no headless Chromium here (Debian: apt-get install chromium-headless-shell); the page is still "
            "checked as well-formed and self-contained by the tests above"
        )
    root = _study_dir(tmp_path, records, objectives, levels)
    assert main([str(root), "--quiet"]) == 0
    url = (root / "best" / "report.html").resolve().as_uri()
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files"]
    dom = subprocess.run([browser, *flags, "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count("<svg") == 2 and "Recommendation" in dom.stdout
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [browser, *flags, f"--screenshot={shot}", "--window-size=1200,2000", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.stat().st_size > 20_000, run.stderr[-2000:]


def test_report_of_a_torn_record_says_who_writes_it_back(tmp_path, records, objectives, levels, capsys) -> None:  # type: ignore[no-untyped-def]
    """A record whose line in trials.jsonl is torn is read from its copy under trials/; the report appends nothing
    (the study's next run does), and its warning used to say the record "is appended again"."""
    root = _study_dir(tmp_path, records, objectives, levels)
    lines = (root / "trials.jsonl").read_text().splitlines()
    lines[1] = lines[1][:25]
    (root / "trials.jsonl").write_text("\n".join(lines) + "\n")
    before = (root / "trials.jsonl").read_bytes()
    assert main([str(root)]) == 0
    err = capsys.readouterr().err
    assert "restored from" in err and "appended again" not in err
    assert "the study's next run writes it back to trials.jsonl" in err
    assert (root / "trials.jsonl").read_bytes() == before
