"""A node-local list of the engine servers autotune started, so a killed driver leaves no server behind.

Each server runs in its own process session (so teardown reaches every rank), which also means it outlives a replica
or a driver that is SIGKILLed. The launcher writes ``<dir>/<pgid>.json`` naming the study that owns the server and
removes it on teardown; a driver that starts (or resumes) a study kills the groups its own earlier run left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(os.environ.get("AUTOTUNE_SERVER_REGISTRY", "/tmp/autotune-servers"))


def register(pgid: int, owner: str, argv: list[str], directory: Path = DEFAULT_DIR, parent: int | None = None) -> Path:
    """``parent``: the process that started the server (a Serve replica), default this one."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{pgid}.json"
    path.write_text(json.dumps({"pgid": pgid, "owner": owner, "argv": argv, "parent": parent or os.getpid()}))
    return path


def unregister(pgid: int, directory: Path = DEFAULT_DIR) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / f"{pgid}.json").unlink()


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


def sweep(owner: str, directory: Path = DEFAULT_DIR) -> list[dict[str, object]]:
    """SIGKILL the process groups that ``owner`` registered and that still run; forget dead entries. Returns the killed."""
    return _sweep(owner, directory, lambda entry: True)


def sweep_orphans(owner: str, directory: Path = DEFAULT_DIR) -> list[dict[str, object]]:
    """Kill ``owner``'s servers whose starting process died (a replica Ray restarted) and forget them.

    Such a server still holds its GPUs, and the replica that replaces the dead one would wait for them in vain. Servers
    whose replica still runs (another slot's, on this node) are left alone."""

    def orphaned(entry: dict[str, Any]) -> bool:
        parent = entry.get("parent")
        return isinstance(parent, int) and not _alive(os.kill, parent)

    return _sweep(owner, directory, orphaned)


def _sweep(owner: str, directory: Path, select: Callable[[dict[str, Any]], bool]) -> list[dict[str, object]]:
    killed: list[dict[str, object]] = []
    if not directory.is_dir():
        return killed
    for path in directory.glob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if entry.get("owner") != owner or not select(entry):
            continue
        pgid = int(entry["pgid"])
        if group_alive(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            killed.append(entry)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return killed
