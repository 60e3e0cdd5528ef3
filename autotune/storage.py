"""Where the Optuna study lives: SQLite in the study directory by default, or a shared database (``--storage URL``,
e.g. PostgreSQL for a team or an optuna-dashboard server). The records in ``results/<study>/`` stay the source of truth
either way; the database holds what the sampler learned."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.records import TrialRecord
from autotune.space import StudySpec
from autotune.studylock import StudyLockedError, describe_holder, holder_info


def redact_url(url: str) -> str:
    """The URL without its password (``postgresql://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def open_shared_study(spec: StudySpec, url: str, records: Sequence[TrialRecord], *, default: bool) -> Any:
    """The study in ``url``; errors say which storage failed and how to fix it.

    On a shared database a study of the same name may belong to another results directory: a study there with
    measured trials while this directory holds no record is refused rather than mixed."""
    import optuna

    from autotune.optuna_study import open_study

    shown = redact_url(url)
    try:
        study = open_study(spec, url)
    except ImportError as exc:
        raise AutotuneError(f"the storage {shown} needs a database driver that is not installed ({exc}); for "
                            "PostgreSQL: pip install 'autotune[postgres]' (psycopg)") from exc
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's errors differ by database; all mean the same here
        if isinstance(exc, AutotuneError):
            raise
        first = str(exc).splitlines()[0] if str(exc) else ""
        if default:
            study_dir = url.removeprefix("sqlite:///").rsplit("/", 1)[0]
            raise AutotuneError(
                f"the study's Optuna database {url.removeprefix('sqlite:///')} cannot be read ({type(exc).__name__}: "
                f"{first}); it may be damaged (a full disk, a copy cut short). The records are the source of truth: "
                f"rebuild it from them with `python -m autotune.report {study_dir} --rebuild-db` (the old file is "
                f"moved aside), then run the same command again.") from exc
        raise AutotuneError(f"cannot open the Optuna study '{spec.name}' in {shown}: {type(exc).__name__}: "
                            f"{first}. Check the URL, that the database server runs and that the user may create "
                            "tables.") from exc
    if not default and not records:
        measured = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                    if "duplicate_of" not in t.user_attrs]
        if measured:
            raise AutotuneError(
                f"the study '{spec.name}' in {shown} already has {len(measured)} finished trial(s), but this results "
                "directory has no record of them: another results directory uses that study name. Use --study with a "
                "new name, or run from the results directory that owns it (--results-dir).")
    return study


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
            f"wait for that run to finish (or stop it), or use --study NEW_NAME.")

    def _lock_file(self, db: Path) -> None:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", self.study)[:80]
        digest = hashlib.sha256(self.study.encode()).hexdigest()[:8]
        path = db.expanduser().resolve().parent / f".{db.name}.{name}-{digest}.lock"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise AutotuneError(f"cannot create the study's lock {path} beside its database ({exc.strerror or exc}); "
                                "the directory of the --storage file must be writable") from exc
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
                got = self._conn.execute(sa.text("SELECT GET_LOCK(:n, 0)"),
                                         {"n": f"autotune:{hashlib.sha256(self.study.encode()).hexdigest()[:40]}"}
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
        row = self._conn.execute(sa.text(
            "SELECT a.application_name, a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
            "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.classid = :hi AND l.objid = :lo AND l.granted"),
            {"hi": unsigned >> 32, "lo": unsigned & 0xFFFFFFFF}).first()
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
