"""Durable study results under ``results/<study>/``: append-only records, one file per trial, server logs.

Every write of a record is append + fsync (``trials.jsonl``) and temp-file + ``os.replace`` (``trials/*.json``), done
BEFORE the sampler is told, so a killed driver never loses a finished trial.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.records import TrialRecord


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True)
class StudyStore:
    root: Path  # results/<study>

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root.resolve() / 'study.db'}"

    @property
    def records_path(self) -> Path:
        return self.root / "trials.jsonl"

    def ensure(self) -> None:
        for sub in ("trials", "logs", "best"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def append(self, record: TrialRecord, log_text: str = "") -> None:
        self.ensure()
        line = json.dumps(record.to_json(), sort_keys=True)
        with self.records_path.open("a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        stem = f"{record.number:04d}-{record.trial_id}"
        atomic_write_text(self.root / "trials" / f"{stem}.json", json.dumps(record.to_json(), indent=2, sort_keys=True))
        if log_text:
            atomic_write_text(self.root / "logs" / f"{stem}.log", log_text)

    def save_raw(self, number: int, trial_id: str, text: str) -> str:
        """Keep a trial result that could not be read as a record; returns where it went."""
        path = self.root / "trials" / f"{number:04d}-{trial_id}.raw.json"
        atomic_write_text(path, text)
        return str(path)

    def load(self) -> list[TrialRecord]:
        """All records, the last one per Optuna trial number winning; a torn last line (killed mid-write) is skipped."""
        if not self.records_path.exists():
            return []
        by_number: dict[int, TrialRecord] = {}
        for raw in self.records_path.read_text().splitlines():
            if not raw.strip():
                continue
            try:
                rec = TrialRecord.from_json(json.loads(raw))
            except (ValueError, TypeError, KeyError):
                continue
            by_number[rec.number] = rec
        return [by_number[k] for k in sorted(by_number)]

    def write_json(self, name: str, data: Any) -> Path:
        path = self.root / name
        atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True, default=str))
        return path

    def archive(self) -> Path | None:
        """Move an existing study directory aside (``--fresh``): nothing is deleted."""
        if not self.root.exists():
            return None
        dest = self.root.with_name(f"{self.root.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
        self.root.rename(dest)
        return dest
