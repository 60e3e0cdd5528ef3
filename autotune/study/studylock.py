"""One driver per study: an exclusive ``flock`` on ``results/<study>/.lock`` held for the whole run.

The holder writes its pid, host, start time and command line into the file, so a second run of the same study can say
who runs it and exit before it touches anything (no orphan sweep, no Optuna storage, no records). The kernel drops the
lock when the holder exits, however it exits (SIGKILL included), so a stale file never blocks a resume.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError

LOCK_NAME = ".lock"


class StudyLockedError(AutotuneError):
    """Another driver runs this study."""


class StudyLock:
    """``with StudyLock(root):`` holds the study's lock; raises StudyLockedError naming the holder if it is taken."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        return self.root / LOCK_NAME

    def acquire(self) -> StudyLock:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            raise AutotuneError(
                f"cannot use {self.root} for the study's results ({exc.strerror or exc}); pass "
                f"--results-dir with a writable directory"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StudyLockedError(
                f"study {self.root} is already being run by {holder}. Two drivers of one study would kill each other's "
                f"servers and run its trials twice; wait for that run to finish (or stop it), or use --study NEW_NAME."
            ) from None
        info = holder_info()
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> StudyLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def holder_info() -> dict[str, Any]:
    """Who holds a lock: this process's pid, host, start time and command line."""
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "argv": sys.argv,
    }


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 65536, 0) or b"{}")
    except (OSError, ValueError):
        info = {}
    return describe_holder(info)


def describe_holder(info: dict[str, Any]) -> str:
    """``pid P on HOST since T (COMMAND)`` for a ``holder_info`` mapping."""
    if not info:
        return "another process (it has not written its details yet)"
    cmd = " ".join(str(a) for a in info.get("argv") or [])[:200]
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('started_at')}" + (f" ({cmd})" if cmd else "")
