"""What ``nvidia-smi`` says about this node's GPUs. Every function returns None/empty where there is no nvidia-smi."""

from __future__ import annotations

import os
import shutil
import subprocess


def query(fields: str) -> list[list[str]] | None:
    """Rows of ``nvidia-smi --query-gpu=FIELDS`` (csv, no header, no units), or None without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return [[c.strip() for c in line.split(",")] for line in out.strip().splitlines() if line.strip()]


def visible_ids() -> list[str]:
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES``, as Ray sets it for a replica)."""
    ids = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return [i.strip() for i in ids.split(",") if i.strip()]


def _selected(rows: list[list[str]], ids: list[str] | None) -> list[list[str]]:
    """Rows whose index (column 0) or UUID (column 1) is in ``ids``; all rows when ids is empty."""
    return [r for r in rows if not ids or r[0] in ids or r[1] in ids]


def count() -> int:
    rows = query("index")
    return len(rows) if rows else 0


def names(ids: list[str] | None = None) -> list[str]:
    rows = query("index,uuid,name")
    return [r[2] for r in _selected(rows, ids)] if rows else []


def memory_used_mib(ids: list[str] | None = None) -> dict[str, int] | None:
    """MiB in use per GPU index, for the GPUs in ``ids`` (index or UUID; all when empty); None where nvidia-smi does not
    report it (``[N/A]`` on unified-memory GPUs such as GB10)."""
    rows = query("index,uuid,memory.used")
    if rows is None:
        return None
    try:
        return {r[0]: int(float(r[2])) for r in _selected(rows, ids)}
    except ValueError:
        return None
