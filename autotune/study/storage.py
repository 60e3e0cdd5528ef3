"""Where the Optuna study lives: SQLite in the study directory by default, or a shared database (``--storage URL``,
e.g. PostgreSQL for a team or an optuna-dashboard server). The records in ``results/<study>/`` stay the source of truth
either way; the database holds what the sampler learned, and ``python -m autotune.study.storage --rebuild-db results/<study>``
rebuilds the default one from the records (``rebuild_db``) after it was lost or damaged. One driver per study on a
storage: ``StorageLock``."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.space import StudySpec
from autotune.study.studylock import StudyLockedError, describe_holder, holder_info
from autotune.trial.records import TrialRecord


def redact_url(url: str) -> str:
    """The URL without its password (``postgresql://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def open_shared_study(spec: StudySpec, url: str, records: Sequence[TrialRecord], *, default: bool) -> Any:
    """The study in ``url``; errors say which storage failed and how to fix it.

    On a shared database a study of the same name may belong to another results directory: a study there with
    measured trials while this directory holds no record is refused rather than mixed."""
    import optuna

    from autotune.study.optuna_study import open_study

    shown = redact_url(url)
    db = Path(url.removeprefix("sqlite:///"))
    if default and records and not db.exists():
        raise _records_without_trials(spec, shown, db.parent, records, default)
    try:
        study = open_study(spec, url)
    except ImportError as exc:
        raise AutotuneError(
            f"the storage {shown} needs a database driver that is not installed ({exc}); for "
            "PostgreSQL: pip install 'autotune[postgres]' (psycopg)"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's errors differ by database; all mean the same here
        if isinstance(exc, AutotuneError):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        if default:
            study_dir = url.removeprefix("sqlite:///").rsplit("/", 1)[0]
            raise AutotuneError(
                f"the study's Optuna database {url.removeprefix('sqlite:///')} cannot be read ({type(exc).__name__}: "
                f"{first}); it may be damaged (a full disk, a copy cut short). The records are the source of truth: "
                f"rebuild it from them with `python -m autotune.study.storage --rebuild-db {shlex.quote(study_dir)}` (the old file is "
                f"moved aside), then run the same command again."
            ) from exc
        raise AutotuneError(
            f"cannot open the Optuna study '{spec.name}' in {shown}: {type(exc).__name__}: "
            f"{first}. Check the URL, that the database server runs and that the user may create "
            "tables."
        ) from exc
    told = {t.number for t in study.get_trials(deepcopy=False) if t.state is not optuna.trial.TrialState.WAITING}
    if any(r.number not in told for r in records):
        raise _records_without_trials(spec, shown, db.parent, records, default, told)
    if not default and not records:
        measured = [
            t
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if "duplicate_of" not in t.user_attrs
        ]
        if measured:
            raise AutotuneError(
                f"the study '{spec.name}' in {shown} already has {len(measured)} finished trial(s), but this results "
                "directory has no record of them: another results directory uses that study name. Use --study with a "
                "new name, or run from the results directory that owns it (--results-dir)."
            )
    return study


def refuse_fresh_on(url: str, study: str) -> None:
    """``--fresh`` with ``--storage URL``: the Optuna study there is not moved aside with the results directory, and
    autotune deletes nothing, so a study there with trials cannot start over; refused before anything moves. A
    storage that cannot be read is left for ``open_shared_study`` to report."""
    import optuna

    try:
        storage = optuna.storages.RDBStorage(url)
        trials = storage.get_all_trials(storage.get_study_id_from_name(study), deepcopy=False)
    except Exception:  # noqa: BLE001 - no such study (KeyError), or a storage open_shared_study reports
        return
    n = sum(1 for t in trials if t.state is not optuna.trial.TrialState.WAITING)
    if n:
        raise AutotuneError(
            f"--fresh cannot start the study '{study}' over in {redact_url(url)}: the Optuna study there holds {n} "
            f"trial(s), and only the results directory is moved aside (autotune deletes nothing). Use --study NEW_NAME, "
            f"or delete that study first (optuna delete-study --storage URL --study-name {shlex.quote(study)})."
        )


def _records_without_trials(
    spec: StudySpec,
    shown: str,
    study_dir: Path,
    records: Sequence[TrialRecord],
    default: bool,
    told: Collection[int] = (),
) -> AutotuneError:
    """The error for records the Optuna study does not hold: its new trials would reuse their numbers, and each new
    record would replace an old one (the last record per number wins)."""
    numbers = sorted(r.number for r in records if r.number not in told)
    which = f"{len(numbers)} of this results directory's records (trial(s) {', '.join(map(str, numbers[:8]))}"
    which += ", ...)" if len(numbers) > 8 else ")"
    if default:
        return AutotuneError(
            f"the study's Optuna database {study_dir / 'study.db'} is missing or older than its records: it holds no "
            f"trial for {which}, so new trials would reuse their numbers and replace them. If the study ran with "
            f"--storage URL, pass that again; else rebuild the database from the records with "
            f"`python -m autotune.study.storage --rebuild-db {shlex.quote(str(study_dir))}`, then run the same "
            f"command again."
        )
    return AutotuneError(
        f"the study '{spec.name}' in {shown} holds no trial for {which}, so new trials would reuse their numbers and "
        f"replace them: the study ran on another storage. Pass the --storage it ran with (or leave --storage out if "
        f"it ran on the default study.db), or use --study NEW_NAME."
    )


def _lock_key(study: str) -> int:
    """A signed 64-bit key for PostgreSQL's advisory locks, the same for a study name on every host."""
    return int.from_bytes(hashlib.sha256(f"autotune-study:{study}".encode()).digest()[:8], "big", signed=True)


class StorageLock:
    """One driver per study on a storage, wherever its results directory is; held for the whole run.

    SQLite: an exclusive ``flock`` on ``.<db file>.<study>.lock`` beside the database file (the kernel drops it when
    the holder dies). PostgreSQL: a session advisory lock keyed by the study name in the same database (the server
    drops it when the holder's connection ends); the holder is named through ``pg_stat_activity``. MySQL: ``GET_LOCK``.
    ``acquire`` raises StudyLockedError naming the holder."""

    def __init__(self, url: str, study: str) -> None:
        self.url = url
        self.study = study
        self._fd: int | None = None
        self._conn: Any = None
        self._engine: Any = None

    def acquire(self) -> StorageLock:
        from sqlalchemy.engine import make_url

        try:
            parsed = make_url(self.url)
        except Exception:  # noqa: BLE001 - Optuna reports a malformed URL with its own message
            return self
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                self._lock_file(Path(parsed.database))
        elif backend in ("postgresql", "mysql"):
            self._lock_sql(backend)
        return self

    def _refused(self, holder: str) -> StudyLockedError:
        return StudyLockedError(
            f"the study '{self.study}' in {redact_url(self.url)} is already being run by {holder}, from another "
            f"results directory. Two drivers of one study would run its trials twice and each keep half the records; "
            f"wait for that run to finish (or stop it), or use --study NEW_NAME."
        )

    def _lock_file(self, db: Path) -> None:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.study)[:80]
        digest = hashlib.sha256(self.study.encode()).hexdigest()[:8]
        path = db.expanduser().resolve().parent / f".{db.name}.{name}-{digest}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise AutotuneError(
                f"cannot create the study's lock {path} beside its database ({exc.strerror or exc}); "
                "the directory of the --storage file must be writable"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                info = json.loads(os.pread(fd, 65536, 0) or b"{}")
            except (OSError, ValueError):
                info = {}
            os.close(fd)
            raise self._refused(describe_holder(info)) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder_info()).encode(), 0)
        self._fd = fd

    def _lock_sql(self, backend: str) -> None:
        import sqlalchemy as sa
        from sqlalchemy.pool import NullPool

        info = holder_info()
        label = f"autotune pid {info['pid']} on {info['host']} since {info['started_at']}"[:63]
        args = {"application_name": label} if backend == "postgresql" else {}
        try:
            self._engine = sa.create_engine(self.url, poolclass=NullPool, connect_args=args)
            self._conn = self._engine.connect()
            if backend == "postgresql":
                key = _lock_key(self.study)
                got = self._conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
                holder = "" if got else self._pg_holder(key)
            else:
                got = self._conn.execute(
                    sa.text("SELECT GET_LOCK(:n, 0)"),
                    {"n": f"autotune:{hashlib.sha256(self.study.encode()).hexdigest()[:40]}"},
                ).scalar()
                holder = "another autotune driver"
            self._conn.commit()
        except ImportError:
            self.release()
            return  # open_shared_study says which driver to install
        except Exception as exc:  # noqa: BLE001 - the database's own errors differ; open_shared_study reports them
            self.release()
            if isinstance(exc, AutotuneError):
                raise
            return
        if not got:
            self.release()
            raise self._refused(holder)

    def _pg_holder(self, key: int) -> str:
        import sqlalchemy as sa

        unsigned = key & 0xFFFFFFFFFFFFFFFF
        row = self._conn.execute(
            sa.text(
                "SELECT a.application_name, a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
                "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = :hi AND l.objid = :lo AND l.granted"
            ),
            {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF},
        ).first()
        if row is None:
            return "another driver (it has just let go; run the command again)"
        return str(row[0] or f"a session from {row[1]} since {row[2]}")

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._conn is not None:
            try:
                self._conn.close()  # the session's advisory lock (or GET_LOCK) goes with it
            except Exception:  # noqa: BLE001 - a connection already lost holds nothing
                pass
            self._conn = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


# --------------------------------------------------------------------------------------- rebuilding study.db
# The old file is moved aside (``study.db.broken-<time>``), never deleted. Every record becomes a finished Optuna trial
# with its parameters, objective values, constraints and tags under its own trial number (numbers with no record, the
# proposals the searcher skipped, become failed trials), so a resume continues the numbering instead of reusing it.


@dataclass(frozen=True)
class Rebuilt:
    db: Path
    moved_aside: Path | None
    trials: int  # Optuna trials written (records plus the numbers without one)
    records: int


def _spec_of(study_dir: Path, space: Path | None) -> StudySpec:
    from autotune.space import load_study
    from autotune.space.types import StudyOverrides

    try:
        saved = json.loads((study_dir / "study.json").read_text())
    except (OSError, ValueError) as exc:
        raise AutotuneError(
            f"{study_dir / 'study.json'} cannot be read ({exc}); it names the study to rebuild"
        ) from exc
    source = space or Path(str(saved.get("source") or ""))
    if not source.is_file():
        raise AutotuneError(f"the study's file {source} is gone; pass it with --space FILE (the same study YAML)")
    return load_study(source, overrides=StudyOverrides(name=str(saved.get("name"))))


def _distribution(spec: StudySpec, name: str) -> Any:
    import optuna.distributions as d

    p = spec.param(name)
    if p.type == "int":
        return d.IntDistribution(int(p.low), int(p.high), step=int(p.step or 1), log=p.log)  # type: ignore[arg-type]  # an int parameter of a validated spec has low and high
    if p.type == "float":
        return d.FloatDistribution(float(p.low), float(p.high), step=p.step, log=p.log)  # type: ignore[arg-type]  # a float parameter of a validated spec has low and high
    return d.CategoricalDistribution(list(p.choices))


def rebuild_db(study_dir: Path, space: Path | None = None) -> Rebuilt:
    import optuna

    from autotune.core.dashboard_attrs import name_objectives
    from autotune.study.optuna_study import constraint_values, make_sampler, objective_values
    from autotune.trial.score import objective_key
    from autotune.trial.store import StudyStore

    spec = _spec_of(study_dir, space)
    store = StudyStore(study_dir)
    records = {r.number: r for r in store.load()}
    if not records:
        raise AutotuneError(f"{study_dir} holds no trial record to rebuild study.db from")
    db = study_dir / "study.db"
    aside = None
    if db.exists():
        aside = db.with_name(f"study.db.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        db.rename(aside)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=spec.name,
        storage=store.db_url,
        sampler=make_sampler(spec),
        directions=[o.direction for o in spec.objectives],
    )
    name_objectives(study, [objective_key(o.metric, o.level) for o in spec.objectives])
    for number in range(max(records) + 1):
        rec = records.get(number)
        if rec is None:
            study.add_trial(
                optuna.trial.create_trial(
                    state=optuna.trial.TrialState.FAIL, user_attrs={"skipped": "rebuilt: no record of this number"}
                )
            )
            continue
        params = {k: v for k, v in rec.params.items() if v is not None and any(p.name == k for p in spec.params)}
        attrs = {"outcome": rec.outcome.value, "trial_id": rec.trial_id, "rebuilt": True}
        if rec.failure is not None:
            attrs["failure"] = rec.failure.value
        try:
            trial = optuna.trial.create_trial(
                params=params,
                distributions={k: _distribution(spec, k) for k in params},
                values=objective_values(spec, rec),
                user_attrs=attrs,
                system_attrs={"constraints": list(constraint_values(spec, rec).values())},
            )
        except ValueError as exc:  # a value outside the study file's range now (the file was edited)
            raise AutotuneError(
                f"trial {number}'s parameters do not fit the study file's ranges ({exc}); pass the "
                "study YAML the study ran with, --space FILE"
            ) from exc
        study.add_trial(trial)
    return Rebuilt(db, aside, max(records) + 1, len(records))


def main(argv: list[str] | None = None) -> int:
    """``python -m autotune.study.storage --rebuild-db results/<study> [--space FILE]``."""
    import argparse
    import sys

    from autotune.study.studylock import StudyLock

    p = argparse.ArgumentParser(
        prog="python -m autotune.study.storage",
        description="Rebuild a study's Optuna database (study.db) from its records; the old "
        "file is moved aside. Then resume the study with the same command as before.",
    )
    p.add_argument("--rebuild-db", type=Path, required=True, metavar="STUDY_DIR")
    p.add_argument("--space", type=Path, help="the study YAML (default: the one study.json names)")
    args = p.parse_args(argv)
    try:
        with StudyLock(args.rebuild_db):
            rebuilt = rebuild_db(args.rebuild_db, args.space)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    moved = f"; the old file is {rebuilt.moved_aside}" if rebuilt.moved_aside else ""
    print(f"rebuilt {rebuilt.db} from {rebuilt.records} record(s) ({rebuilt.trials} Optuna trial(s)){moved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
