"""A study's machine-readable summary (``--json`` of ``autotune.search`` and ``autotune.report``): what ran, how it
ended, the best trial and where the files are. Built from the study directory alone (no Ray)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.export.banner import is_simulated, study_banner
from autotune.trial.records import TrialOutcome
from autotune.trial.store import StudyStore

SCHEMA_VERSION = 1


def read_study_json(root: Path) -> dict[str, Any]:
    path = root / "study.json"
    if not path.exists():
        raise AutotuneError(
            f"{root} is not a study directory (no study.json); pass results/<study> as written by "
            "python -m autotune.search"
        )
    try:
        return json.loads(path.read_text())
    except ValueError as exc:
        raise AutotuneError(
            f"{path} is not valid JSON ({exc}); restore it from the study file with "
            "python -m autotune.search --validate-only"
        ) from exc


def summary_document(root: Path, *, exit_code: int | None = None, stop_reason: str = "") -> dict[str, Any]:
    root = Path(root)
    study = read_study_json(root)
    records = StudyStore(root).load()
    failures = Counter(r.failure.value for r in records if r.failure is not None)
    best_path = root / "best" / "best.json"
    best_doc = json.loads(best_path.read_text()) if best_path.exists() else {}
    best = best_doc.get("best")
    files = sorted(p.name for p in (root / "best").glob("*") if p.is_file()) if (root / "best").is_dir() else []
    return {
        "schema_version": SCHEMA_VERSION,
        "study": study.get("name", root.name),
        "results_dir": str(root.resolve()),
        "engine": study_banner(records),
        "simulated": is_simulated(records),
        "objectives": study.get("objectives", []),
        "trials": {
            "total": len(records),
            "planned": study.get("trials"),
            "complete": sum(1 for r in records if r.outcome is TrialOutcome.COMPLETE),
            "feasible": sum(1 for r in records if r.feasible),
            "failed": sum(1 for r in records if r.outcome is TrialOutcome.FAILED),
            "invalid": sum(1 for r in records if r.outcome is TrialOutcome.INVALID),
            "failures_by_kind": dict(sorted(failures.items())),
        },
        "best": None
        if not best
        else {
            "number": best.get("number"),
            "trial_id": best.get("trial_id"),
            "params": best.get("params"),
            "objectives": best.get("objectives"),
            "argv": best.get("argv"),
        },
        "best_reason": best_doc.get("reason", ""),
        "best_dir": str((root / "best").resolve()),
        "files": files,
        "exit_code": exit_code,
        "stop_reason": stop_reason,
        "stopped_early": study.get("stopped_early", ""),
        "decided_by": best_doc.get("decided_by", ""),
    }


def print_summary(root: Path, **kw: Any) -> None:
    """Print the summary as one JSON document on stdout; a study directory that cannot be read prints its error."""
    try:
        doc = summary_document(root, **kw)
    except AutotuneError as exc:
        doc = {"schema_version": SCHEMA_VERSION, "results_dir": str(root), "error": str(exc), **kw}
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()
