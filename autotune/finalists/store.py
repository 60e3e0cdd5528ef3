"""Durable finalist runs under ``results/<study>/``, apart from the trials (the sampler never sees them).

- ``finalists.jsonl``: one ``FinalistRun`` a line (kind ``finalist``, the stage, the round, the trial it repeats, its
  full record), append + fsync as each relaunch finishes, so a killed driver neither loses nor repeats one;
- ``finalists/stage-<s>.json``: each stage's plan (its finalists and rounds), written before its first launch;
- ``finalists/<stage>-<round>-<number>.json`` and ``logs/<number>-<trial id>-f<s>r<r>.log``: a run's record and log.

A torn last line (a write cut short) is skipped with a warning on reading and never glued to the next append.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.finalists.choice import study_outcome
from autotune.finalists.outcome import FinalistOutcome, FinalistRun, StagePlan
from autotune.space import Objective
from autotune.trial.records import TrialRecord
from autotune.trial.store import atomic_write_text, warn

RUNS = "finalists.jsonl"
FOLDER = "finalists"


@dataclass(frozen=True)
class FinalistStore:
    root: Path  # results/<study>

    @property
    def runs_path(self) -> Path:
        return self.root / RUNS

    def save_plan(self, plan: StagePlan) -> None:
        atomic_write_text(self.root / FOLDER / f"stage-{plan.stage}.json", json.dumps(plan.to_json(), indent=2))

    def plans(self) -> list[StagePlan]:
        folder = self.root / FOLDER
        out = []
        for path in sorted(folder.glob("stage-*.json")) if folder.exists() else []:
            try:
                out.append(StagePlan.from_json(json.loads(path.read_text())))
            except (ValueError, KeyError, TypeError) as exc:
                warn(f"{path}: unreadable finalist stage plan, ignored ({type(exc).__name__}: {exc})")
        return sorted(out, key=lambda p: p.stage)

    def append(self, run: FinalistRun, log_text: str = "") -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps(run.to_json(), sort_keys=True)
        with self.runs_path.open("ab") as fh:
            if fh.tell() > 0:
                with self.runs_path.open("rb") as rd:
                    rd.seek(-1, os.SEEK_END)
                    if rd.read(1) != b"\n":
                        fh.write(b"\n")  # end a torn last line, so this record is a line of its own
            fh.write(line.encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        stem = f"{run.stage}-{run.round}-{run.repeats:04d}"
        atomic_write_text(self.root / FOLDER / f"{stem}.json", json.dumps(run.to_json(), indent=2, sort_keys=True))
        if log_text:
            atomic_write_text(self.root / "logs" / f"{run.repeats:04d}-{run.record.trial_id}.log", log_text)

    def load(self) -> list[FinalistRun]:
        """Every stored run, the last one per (stage, round, trial) winning."""
        if not self.runs_path.exists():
            return []
        by_key: dict[tuple[int, int, int], FinalistRun] = {}
        for i, raw in enumerate(self.runs_path.read_text().splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                run = FinalistRun.from_json(json.loads(raw))
            except (ValueError, KeyError, TypeError) as exc:
                warn(f"{self.runs_path} line {i}: unreadable finalist run, skipped ({type(exc).__name__})")
                continue
            by_key[run.key] = run
        return [by_key[k] for k in sorted(by_key)]


def outcome_from_study(root: Path, study: Mapping[str, Any], records: Sequence[TrialRecord]) -> FinalistOutcome:
    """The finalist outcome of a study directory, from its ``study.json`` (objectives, finalists) and stored runs
    (``python -m autotune.report`` re-renders an export with it)."""
    first = (study.get("objectives") or [{}])[0]
    fin = study.get("finalists") or {}
    store = FinalistStore(root)
    objective = Objective(
        str(first.get("metric", "output_tok_per_s")), first.get("level", "max"), first.get("direction", "maximize")
    )
    return study_outcome(
        records,
        store.plans(),
        store.load(),
        objective=objective,
        alpha=float(fin.get("alpha", 0.05)),
        count=int(fin.get("count", 0)),
        baseline=study_baseline(study),
    )


def study_baseline(study: Mapping[str, Any]) -> dict[str, Any] | None:
    """The baseline point of a study as ``study.json`` holds it (``StudySpec.baseline``)."""
    if study.get("baseline_point") is not None:
        return dict(study["baseline_point"])
    points = study.get("points_to_evaluate") or []
    return dict(points[0]) if points else None
