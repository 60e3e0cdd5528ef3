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
from pathlib import Path

DEFAULT_DIR = Path(os.environ.get("AUTOTUNE_SERVER_REGISTRY", "/tmp/autotune-servers"))


def register(pgid: int, owner: str, argv: list[str], directory: Path = DEFAULT_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{pgid}.json"
    path.write_text(json.dumps({"pgid": pgid, "owner": owner, "argv": argv}))
    return path


def unregister(pgid: int, directory: Path = DEFAULT_DIR) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / f"{pgid}.json").unlink()


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (a group we may not signal counts as running)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(owner: str, directory: Path = DEFAULT_DIR) -> list[dict[str, object]]:
    """SIGKILL the process groups that ``owner`` registered and that still run; forget dead entries. Returns the killed."""
    killed: list[dict[str, object]] = []
    if not directory.is_dir():
        return killed
    for path in directory.glob("*.json"):
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if entry.get("owner") != owner:
            continue
        pgid = int(entry["pgid"])
        if group_alive(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            killed.append(entry)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return killed
