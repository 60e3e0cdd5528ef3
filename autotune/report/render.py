"""Re-render a study's ``best/`` from its records, and write ``best/report.html`` beside ``report.md``."""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autotune.core.errors import AutotuneError
from autotune.export import ExportResult, export_study
from autotune.export.estimates import read_estimates
from autotune.export.writer import BEST_DIR, BEST_JSON
from autotune.finalists.outcome import FinalistOutcome
from autotune.finalists.store import outcome_from_study, study_baseline
from autotune.report.html import render_html
from autotune.report.study_summary import read_study_json
from autotune.space import Objective
from autotune.trial.records import TrialRecord
from autotune.trial.store import StudyStore

REPORT_HTML = "report.html"


@dataclass(frozen=True)
class Rendered:
    export: ExportResult
    html: Path
    records: tuple[TrialRecord, ...]
    objectives: tuple[Objective, ...]
    load_levels: tuple[int, ...]
    finalists: FinalistOutcome | None = None  # the finalist stage's outcome the export used
    estimates: dict[int, float] | None = None  # the model's estimates it ranked by (model_estimates.json)


def _export_http(study: dict) -> tuple[str, int] | None:
    """The Serve HTTP host and port a study's export binds (``export.http_host`` / ``http_port``), from study.json."""
    http = study.get("export_http")
    return (str(http[0]), int(http[1])) if isinstance(http, (list, tuple)) and len(http) == 2 else None


def write_html(export: ExportResult, *, title: str) -> Path:
    """``report.html`` from the ``report.md`` and charts ``export`` just wrote."""
    best_dir = export.best_dir
    charts = {p.name: p.read_text() for p in (export.throughput_svg, export.pareto_svg) if p.exists()}
    page = render_html(
        export.report.read_text(),
        charts,
        title=title,
        note=f"autotune report, rendered {time.strftime('%Y-%m-%d %H:%M:%S %Z')} from the study's "
        "records (trials.jsonl); report.md holds the same text.",
    )
    path = best_dir / REPORT_HTML
    fd, tmp = tempfile.mkstemp(dir=best_dir, prefix=f".{REPORT_HTML}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(page)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _previous_note(root: Path) -> str:
    """The banner of the export in ``root/best/`` (an interrupt, the time box, infrastructure events: what the run that
    exported said about itself, which the records alone do not tell), or ``""``."""
    try:
        note = json.loads((root / BEST_DIR / BEST_JSON).read_text()).get("note")
    except (OSError, ValueError, AttributeError):
        return ""
    return note if isinstance(note, str) else ""


def rerender(root: Path) -> Rendered:
    """Export ``root/best/`` again from ``root/trials.jsonl`` and ``root/study.json``; raises AutotuneError when the
    directory is not a study or holds no record."""
    root = Path(root)
    study = read_study_json(root)
    try:
        objectives = tuple(Objective(str(o["metric"]), o["level"], o["direction"]) for o in study["objectives"])
        levels = tuple(int(c) for c in study["plan"]["concurrencies"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AutotuneError(
            f"{root / 'study.json'} lacks the objectives or load levels ({exc}); was it written by "
            "python -m autotune.search?"
        ) from exc
    records = tuple(StudyStore(root).load())
    if not records:
        raise AutotuneError(
            f"{root} holds no trial record (trials.jsonl is missing or empty): nothing to report; run the study first"
        )
    study_only = (study.get("server") or {}).get("study_only") or None
    finalists = outcome_from_study(root, study, records)
    estimates = read_estimates(root, records)
    note = _previous_note(root)
    export = export_study(
        root,
        study_name=str(study.get("name", root.name)),
        objectives=objectives,
        records=records,
        load_levels=levels,
        study_only=study_only,
        finalists=finalists,
        note=note,
        stopped_early=str(study.get("stopped_early") or ""),
        baseline=study_baseline(study),
        http=_export_http(study),
        estimates=estimates,
    )
    html = write_html(export, title=f"autotune study {study.get('name', root.name)}")
    return Rendered(
        export=export,
        html=html,
        records=records,
        objectives=objectives,
        load_levels=levels,
        finalists=finalists,
        estimates=estimates,
    )
