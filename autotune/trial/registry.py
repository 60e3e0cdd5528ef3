"""A node-local list of the engine servers autotune started, so a killed driver leaves no server behind.

Each server runs in its own process session (so teardown reaches every rank), which also means it outlives a replica
or a driver that is SIGKILLed. The launcher writes ``<dir>/<pgid>.json`` naming the study that owns the server and
removes it on teardown; a driver that starts (or resumes) a study kills the groups its own earlier run left behind.

The sweep signals only what it started. Each entry records the leader's identity at launch: its start time (field 22
of ``/proc/<pid>/stat``, clock ticks since boot, so a reused pid never matches) and its command line. Before any signal
the live process must show the same start time and command line; a leader that has exited is matched through the
members of its session (``start_new_session``: session id = pgid) that started no earlier than it. An entry that does
not match (pid reuse, a stale or planted file) is forgotten and nothing is signalled.

The directory is per user: ``$AUTOTUNE_SERVER_REGISTRY``, else ``$XDG_RUNTIME_DIR/autotune-servers``, else
``/tmp/autotune-servers-<uid>``; it is created 0700 and refused when it is a symlink or owned by another user.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError


def default_dir() -> Path:
    if os.environ.get("AUTOTUNE_SERVER_REGISTRY"):
        return Path(os.environ["AUTOTUNE_SERVER_REGISTRY"])
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "autotune-servers"
    return Path("/tmp") / f"autotune-servers-{os.getuid()}"


DEFAULT_DIR = default_dir()


class RegistryError(AutotuneError):
    """The registry directory is unsafe to use (a symlink, another user's, not a directory)."""


def safe_dir(directory: Path) -> Path:
    """Create ``directory`` 0700 if missing; refuse a symlink, a non-directory or another user's directory, and say
    what to do when it cannot be created or read."""
    try:
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=0o700, parents=True)
        st = os.lstat(directory)
    except OSError as exc:
        raise RegistryError(_unwritable(directory, exc)) from exc
    if stat.S_ISLNK(st.st_mode):
        raise RegistryError(
            f"server registry {directory} is a symlink; refusing to use it. Remove it, or set "
            f"AUTOTUNE_SERVER_REGISTRY to a directory of your own."
        )
    if not stat.S_ISDIR(st.st_mode):
        raise RegistryError(
            f"server registry {directory} is not a directory; remove it or set AUTOTUNE_SERVER_REGISTRY."
        )
    if st.st_uid != os.getuid():
        raise RegistryError(
            f"server registry {directory} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
            f"refusing to use it. Set AUTOTUNE_SERVER_REGISTRY to a directory of your own."
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(directory, 0o700)
    return directory


def _unwritable(directory: Path, exc: OSError) -> str:
    return (
        f"server registry {directory} cannot be used ({exc.strerror or exc}): autotune notes each server it "
        f"starts there so that it can stop them after a crash. Set AUTOTUNE_SERVER_REGISTRY to a writable "
        f"directory of your own (on every node), or fix that directory's permissions."
    )


def check_writable(directory: Path | None = None) -> None:
    """Raise RegistryError (one line, with the fix) unless a server could be registered in ``directory``."""
    directory = safe_dir(directory or DEFAULT_DIR)
    probe = directory / f".probe.{os.getpid()}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise RegistryError(_unwritable(directory, exc)) from exc


@dataclass(frozen=True)
class ProcIdentity:
    start_ticks: int  # /proc/<pid>/stat field 22
    cmdline: tuple[str, ...]
    pgrp: int
    session: int


def identity(pid: int) -> ProcIdentity | None:
    """The process's identity from ``/proc``; None when it does not exist (or ``/proc`` cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is rest[0]
    try:
        return ProcIdentity(
            start_ticks=int(rest[19]),
            cmdline=tuple(a.decode("utf-8", "replace") for a in cmd.split(b"\0") if a),
            pgrp=int(rest[2]),
            session=int(rest[3]),
        )
    except (IndexError, ValueError):
        return None


def register(pgid: int, owner: str, argv: list[str], directory: Path | None = None, parent: int | None = None) -> Path:
    """``parent``: the process that started the server (a Serve replica), default this one."""
    directory = safe_dir(directory or DEFAULT_DIR)
    path = directory / f"{pgid}.json"
    ident = identity(pgid)
    entry = {
        "pgid": pgid,
        "owner": owner,
        "argv": argv,
        "parent": parent or os.getpid(),
        "start_ticks": ident.start_ticks if ident else None,
        "cmdline": list(ident.cmdline) if ident else None,
    }
    tmp = directory / f".{pgid}.json.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(entry))
        os.replace(tmp, path)
    except OSError as exc:
        raise RegistryError(_unwritable(directory, exc)) from exc
    return path


def unregister(pgid: int, directory: Path | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        ((directory or DEFAULT_DIR) / f"{pgid}.json").unlink()


def _alive(signal_zero: Callable[[int, int], None], ident: int) -> bool:
    """Whether ``signal_zero(ident, 0)`` finds it running (one we may not signal counts as running)."""
    try:
        signal_zero(ident, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a group we may not signal counts as running)."""
    return _alive(os.killpg, pgid)


def _session_members(pgid: int, not_before: int) -> list[int]:
    """Pids in session ``pgid`` and group ``pgid`` that started at or after ``not_before`` ticks."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            ident = identity(int(d.name))
            if ident and ident.session == pgid and ident.pgrp == pgid and ident.start_ticks >= not_before:
                out.append(int(d.name))
    return out


def verified(entry: dict[str, Any]) -> str:
    """'' when the group named by ``entry`` is the server that was registered (safe to signal), else why not."""
    pgid, start, cmdline = entry.get("pgid"), entry.get("start_ticks"), entry.get("cmdline")
    if not isinstance(pgid, int) or pgid <= 1 or not isinstance(start, int) or not isinstance(cmdline, list):
        return "the entry carries no process identity (a stale or foreign file)"
    live = identity(pgid)
    if live is not None:
        if live.start_ticks != start:
            return f"pid {pgid} now belongs to a process started later (pid reused)"
        if list(live.cmdline) != cmdline:
            return f"pid {pgid} runs {' '.join(live.cmdline)[:120]!r}, not the registered server"
        if live.pgrp != pgid:
            return f"pid {pgid} is no longer the leader of its process group"
        return ""
    if _session_members(pgid, start):
        return ""  # the leader exited; ranks it started still run in its session
    return "no process of the registered server runs"


def sweep(owner: str, directory: Path | None = None) -> list[dict[str, object]]:
    """SIGKILL the process groups that ``owner`` registered and that still run; forget dead entries. Returns the killed."""
    return _sweep(owner, directory or DEFAULT_DIR, lambda entry: True)


def sweep_orphans(owner: str, directory: Path | None = None) -> list[dict[str, object]]:
    """Kill ``owner``'s servers whose starting process died (a replica Ray restarted) and forget them.

    Such a server still holds its GPUs, and the replica that replaces the dead one would wait for them in vain. Servers
    whose replica still runs (another slot's, on this node) are left alone."""

    def orphaned(entry: dict[str, Any]) -> bool:
        parent = entry.get("parent")
        return isinstance(parent, int) and not _alive(os.kill, parent)

    return _sweep(owner, directory or DEFAULT_DIR, orphaned)


def _sweep(owner: str, directory: Path, select: Callable[[dict[str, Any]], bool]) -> list[dict[str, object]]:
    killed: list[dict[str, object]] = []
    if not directory.exists() and not directory.is_symlink():
        return killed
    safe_dir(directory)
    for path in directory.glob("*.json"):
        if path.is_symlink():
            continue
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(entry, dict) or entry.get("owner") != owner or not select(entry):
            continue
        why_not = verified(entry)
        if not why_not:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(entry["pgid"]), signal.SIGKILL)
            killed.append(entry)
        elif isinstance(entry.get("pgid"), int) and entry["pgid"] > 1 and group_alive(entry["pgid"]):
            print(
                f"warning: not signalling process group {entry.get('pgid')} from {path}: {why_not}; the entry is "
                f"forgotten",
                file=sys.stderr,
            )
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return killed
