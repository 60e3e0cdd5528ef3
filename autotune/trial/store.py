"""Durable study results under ``results/<study>/``: append-only records, one file per trial, server logs.

Every write of a record is append + fsync (``trials.jsonl``) and temp-file + ``os.replace`` (``trials/*.json``), done
BEFORE the sampler is told, so a killed driver never loses a finished trial.

A write cut short (disk full, a kill mid-write) leaves a last line without its newline. Before the next append that
fragment is moved to ``trials.jsonl.torn`` (with a warning), so the next record starts on a line of its own instead of
being glued onto the fragment and lost with it. Reading never drops a line silently: an unreadable line, or a record
with fields this version does not know, is reported on stderr (the unknown fields are kept, see ``TrialRecord.extra``).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.trial.records import SCHEMA_VERSION, TrialRecord


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LoadReport:
    """What ``StudyStore.read`` found: the records (last one per trial number) and every line it could not use."""

    records: list[TrialRecord]
    unreadable: list[str] = field(default_factory=list)  # "trials.jsonl line N: why"
    unknown_fields: list[str] = field(default_factory=list)  # "line N (trial T, schema v): a, b"
    torn_tail: str = ""  # a last line without its newline (a write cut short), not yet repaired
    restored: list[str] = field(default_factory=list)  # "trials/NNNN-ID.json": records missing from trials.jsonl

    def problems(self) -> list[str]:
        out = [f"unreadable record, skipped: {u}" for u in self.unreadable]
        out += [
            f"restored from {r}: its record is missing from trials.jsonl (an unreadable line); it is read from that "
            f"copy, and the study's next run writes it back to trials.jsonl (it is not rerun)"
            for r in self.restored
        ]
        out += [
            f"record from a newer autotune (schema > {SCHEMA_VERSION}), unknown fields kept: {u}"
            for u in self.unknown_fields
        ]
        if self.torn_tail:
            out.append(f"the last line of trials.jsonl is incomplete (a write cut short): {self.torn_tail[:80]!r}")
        return out


def _tail_after_last_newline(fh: Any, size: int, block: int = 65536) -> bytes:
    """The bytes after the last ``\\n`` of an open binary file of ``size`` bytes (the whole file if it has none)."""
    pos, tail = size, b""
    while pos > 0:
        step = min(block, pos)
        pos -= step
        fh.seek(pos)
        tail = fh.read(step) + tail
        cut = tail.rfind(b"\n")
        if cut >= 0:
            return tail[cut + 1 :]
    return tail


def file_mode(directory: Path) -> int:
    """The mode of a new file in ``directory``: 0600 in a private (0700) directory, else 0644."""
    try:
        private = stat.S_IMODE(directory.stat().st_mode) & 0o077 == 0
    except OSError:
        private = False
    return 0o600 if private else 0o644


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, file_mode(path.parent))
    with os.fdopen(fd, "w") as fh:
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
        mode = 0o700 if file_mode(self.root) == 0o600 else 0o777  # a private study's folders are private too
        for sub in ("trials", "logs", "best"):
            (self.root / sub).mkdir(mode=mode, parents=True, exist_ok=True)

    def make_private(self) -> None:
        """Keep the study from other users (it has a secret): its folders 0700, its files 0600, as are new ones."""
        for path in [self.root, *self.root.rglob("*")]:
            if path.is_symlink():
                continue
            os.chmod(path, 0o700 if path.is_dir() else stat.S_IMODE(path.stat().st_mode) & 0o700)

    @property
    def torn_path(self) -> Path:
        return self.root / "trials.jsonl.torn"

    def repair(self) -> str:
        """Move a torn last line (no trailing newline) to ``trials.jsonl.torn`` and cut it off; returns the fragment."""
        path = self.records_path
        if not path.exists():
            return ""
        with path.open("rb+") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return ""
            fh.seek(size - 1)
            if fh.read(1) == b"\n":
                return ""
            data = _tail_after_last_newline(fh, size)
            with self.torn_path.open("ab") as torn:
                torn.write(data + b"\n")
                torn.flush()
                os.fsync(torn.fileno())
            fh.truncate(size - len(data))
            fh.flush()
            os.fsync(fh.fileno())
        fragment = data.decode("utf-8", "replace")
        warn(
            f"{path}: the last line was cut short (a disk-full or a killed driver mid-write); its {len(data)} bytes "
            f"were moved to {self.torn_path} and the file now ends at the last complete record."
        )
        return fragment

    def restore(self) -> list[str]:
        """Append to trials.jsonl the records only ``trials/`` still holds (their line was torn or unreadable), so the
        file is whole again and a resume does not rerun them; returns the files used."""
        report = self.read()
        if not report.restored:
            return []
        by_file = {str(self.root / "trials" / f"{r.number:04d}-{r.trial_id}.json"): r for r in report.records}
        fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, file_mode(self.root))
        with os.fdopen(fd, "a") as fh:
            for name in report.restored:
                fh.write(json.dumps(by_file[name].to_json(), sort_keys=True) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        warn(
            f"{self.records_path}: restored {len(report.restored)} record(s) from trials/ "
            f"({', '.join(Path(n).name for n in report.restored)}); the unreadable line(s) stay and are reported"
        )
        return report.restored

    def append(self, record: TrialRecord, log_text: str = "") -> None:
        self.ensure()
        self.repair()
        line = json.dumps(record.to_json(), sort_keys=True)
        fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, file_mode(self.root))
        with os.fdopen(fd, "a") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        stem = f"{record.number:04d}-{record.trial_id}"
        atomic_write_text(self.root / "trials" / f"{stem}.json", json.dumps(record.to_json(), indent=2, sort_keys=True))
        if log_text:
            atomic_write_text(self.root / "logs" / f"{stem}.log", log_text)

    @property
    def stops_path(self) -> Path:
        return self.root / "stops.jsonl"

    def append_stop(self, event: dict[str, Any]) -> None:
        """Record why a run stopped before the study was done (an interrupt, the Ray cluster lost): not a trial."""
        self.ensure()
        with self.stops_path.open("a") as fh:
            fh.write(json.dumps(event, sort_keys=True, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def save_raw(self, number: int, trial_id: str, text: str) -> str:
        """Keep a trial result that could not be read as a record; returns where it went."""
        path = self.root / "trials" / f"{number:04d}-{trial_id}.raw.json"
        atomic_write_text(path, text)
        return str(path)

    def read(self) -> LoadReport:
        """Every record (the last one per Optuna trial number winning) and what could not be used, unprinted."""
        if not self.records_path.exists():
            return LoadReport([])
        data = self.records_path.read_bytes()
        torn = ""
        if data and not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            torn = data[cut:].decode("utf-8", "replace")
            data = data[:cut]
        by_number: dict[int, TrialRecord] = {}
        unreadable: list[str] = []
        unknown: list[str] = []
        for lineno, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                rec = TrialRecord.from_json(json.loads(raw))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                unreadable.append(f"{self.records_path} line {lineno}: {type(exc).__name__}: {exc} ({raw[:80]!r})")
                continue
            if rec.extra:
                unknown.append(
                    f"{self.records_path} line {lineno} (trial {rec.number}, schema "
                    f"{rec.schema_version}): {', '.join(rec.unknown_fields())}"
                )
            by_number[rec.number] = rec
        restored = self._restore_from_copies(by_number) if unreadable or torn else []
        return LoadReport([by_number[k] for k in sorted(by_number)], unreadable, unknown, torn, restored)

    def _restore_from_copies(self, by_number: dict[int, TrialRecord]) -> list[str]:
        """Add to ``by_number`` each record of ``trials/`` (written after its line of trials.jsonl) whose trial number
        has no readable line; returns the files used."""
        restored = []
        for path in sorted((self.root / "trials").glob("[0-9]*.json")):
            if path.name.endswith(".raw.json"):
                continue
            try:
                number = int(path.name.split("-", 1)[0])
                if number in by_number:
                    continue
                rec = TrialRecord.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, TypeError, KeyError, AttributeError):
                continue
            if rec.number == number:
                by_number[number] = rec
                restored.append(str(path))
        return restored

    def load(self) -> list[TrialRecord]:
        """All records, the last one per Optuna trial number winning; every line not used is reported on stderr."""
        report = self.read()
        for problem in report.problems():
            warn(problem)
        return report.records

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
