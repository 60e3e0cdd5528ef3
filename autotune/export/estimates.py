"""``model_estimates.json`` in the study folder: the estimates the study's export ranked by
(``autotune.study.model_rank``), kept so that ``python -m autotune.report`` exports the same best without refitting
the model. They hold for the trials they were fitted to: once the study has other records, they are not read."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from autotune.trial.records import TrialRecord

ESTIMATES_JSON = "model_estimates.json"


def write_estimates(root: Path, estimates: Mapping[int, float], records: Sequence[TrialRecord]) -> Path:
    """Write the estimates with the trial numbers they were fitted to (atomically)."""
    path = Path(root) / ESTIMATES_JSON
    doc = {
        "about": "the model's estimate of the first objective per trial (autotune.study.model_rank); the export "
        "ranks feasible trials by it where no finalist stage decided",
        "fitted_to": sorted(r.number for r in records),
        "estimates": {str(n): v for n, v in sorted(estimates.items())},
    }
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{ESTIMATES_JSON}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def read_estimates(root: Path, records: Sequence[TrialRecord]) -> dict[int, float] | None:
    """The stored estimates when they were fitted to exactly these records' trials; None otherwise (no file, another
    set of trials, or a file that does not parse)."""
    path = Path(root) / ESTIMATES_JSON
    try:
        doc = json.loads(path.read_text())
        if sorted(doc["fitted_to"]) != sorted(r.number for r in records):
            return None
        return {int(n): float(v) for n, v in doc["estimates"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None
