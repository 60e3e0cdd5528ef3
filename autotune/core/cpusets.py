"""Disjoint CPU sets for a node's GPU slots, so trials that share a node do not share CPU cores.

The node's usable CPUs (this process's affinity, ``os.sched_getaffinity``) are ordered by NUMA node
(``/sys/devices/system/node/node*/cpulist``) and cut into ``parts`` contiguous, near-equal chunks; part ``k`` goes to
the slot whose GPUs come ``k``-th on the node (GPU index // GPUs per slot), or, where there are no physical GPUs to go
by (the simulator) or the study has fewer slots on the node than it has places (``--max-concurrent``), to slot ``k`` of
the study's ``parts`` slots there. Ordering by NUMA node keeps a chunk inside one node
whenever the parts divide the nodes evenly, and on the usual 8-GPU boards (GPUs 0-3 on the first socket, 4-7 on the
second) the chunk of GPU ``g`` lies on ``g``'s own socket.

With fewer CPUs than parts the sets cannot be disjoint: every slot then gets all CPUs and the plan says so (``shared``).
The server process and its benchmark client are both pinned to the slot's set (``os.sched_setaffinity``); the record
keeps the set and how it was chosen.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

NODE_DIR = Path("/sys/devices/system/node")


@dataclass(frozen=True)
class CpuPlan:
    """The CPUs a slot's server and client run on, and why (for the record)."""

    cpus: tuple[int, ...]
    how: str  # "disjoint", "whole node", "shared", "off", "unavailable"
    part: int = 0
    parts: int = 1
    numa_nodes: int = 1
    detail: str = ""

    @property
    def cpulist(self) -> str:
        return format_cpulist(self.cpus)


def parse_cpulist(text: str) -> list[int]:
    """``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if m is None:
            raise ValueError(f"not a CPU list: {text!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(lo, hi + 1))
    return out


def format_cpulist(cpus: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``."""
    s = sorted(set(cpus))
    out = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        out.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(out)


def numa_cpus(node_dir: Path = NODE_DIR) -> list[list[int]]:
    """CPUs of each NUMA node (empty list where sysfs does not say)."""
    nodes = []
    for path in sorted(node_dir.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) if node_dir.exists() else []:
        try:
            cpus = parse_cpulist((path / "cpulist").read_text())
        except (OSError, ValueError):
            continue
        if cpus:
            nodes.append(cpus)
    return nodes


def partition(cpus: Sequence[int], parts: int, numa: Sequence[Sequence[int]] = ()) -> list[tuple[int, ...]]:
    """``cpus`` in NUMA order, cut into ``parts`` contiguous chunks whose sizes differ by at most one."""
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts}")
    allowed = set(cpus)
    order = [c for node in numa for c in node if c in allowed]
    order += sorted(allowed - set(order))
    base, extra = divmod(len(order), parts)
    out, start = [], 0
    for k in range(parts):
        size = base + (1 if k < extra else 0)
        out.append(tuple(sorted(order[start : start + size])))
        start += size
    return out


def plan_for_slot(
    *, available: Sequence[int], part: int, parts: int, numa: Sequence[Sequence[int]] = (), enabled: bool = True
) -> CpuPlan:
    """The CPU set of part ``part`` of ``parts`` on a node whose usable CPUs are ``available`` (pure)."""
    cpus = tuple(sorted(set(available)))
    nodes = max(1, len(numa))
    if not enabled:
        return CpuPlan(cpus, "off", part, parts, nodes, "cpu_isolation: off")
    if not cpus:
        return CpuPlan((), "unavailable", part, parts, nodes, "no CPU affinity information")
    if parts <= 1:
        return CpuPlan(cpus, "whole node", 0, 1, nodes, "one slot on the node")
    if len(cpus) < parts:
        return CpuPlan(
            cpus,
            "shared",
            part,
            parts,
            nodes,
            f"{len(cpus)} CPU(s) for {parts} slots: too few for disjoint sets, every slot uses all of them",
        )
    chunk = partition(cpus, parts, numa)[part % parts]
    on = sorted({i for i, node in enumerate(numa) if set(chunk) & set(node)})
    where = f" on NUMA node(s) {','.join(map(str, on))}" if numa else ""
    return CpuPlan(chunk, "disjoint", part % parts, parts, nodes, f"part {part % parts + 1} of {parts}{where}")


def slot_part(
    gpu_ids: Sequence[str], node_gpus: int, gpus_per_slot: int, slot: int | None, slots: int | None
) -> tuple[int, int] | None:
    """``(part, parts)`` for a slot: by its GPUs where the node's physical GPUs are known and the study has a slot on
    each place of them (``slots``, the study's slots on the node, unknown or equal), else by its slot index."""
    ids = [int(g) for g in gpu_ids if g.strip().isdigit()]
    if ids and node_gpus > 0 and gpus_per_slot > 0 and len(ids) == gpus_per_slot:
        parts = max(1, node_gpus // gpus_per_slot)
        if not slots or slots == parts:
            return min(ids) // gpus_per_slot, parts
    if slot is not None and slots:
        return slot, slots
    return None


def plan_here(
    *,
    gpu_ids: Sequence[str],
    node_gpus: int,
    gpus_per_slot: int,
    slot: int | None,
    slots: int | None,
    enabled: bool = True,
) -> CpuPlan:
    """The plan for this process's node (reads the affinity and sysfs)."""
    try:
        available = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = []
    where = slot_part(gpu_ids, node_gpus, gpus_per_slot, slot, slots)
    if where is None:
        return CpuPlan(
            tuple(available),
            "whole node",
            0,
            1,
            max(1, len(numa_cpus())),
            "slot unknown (a trial outside a study's slots)",
        )
    part, parts = where
    return plan_for_slot(available=available, part=part, parts=parts, numa=numa_cpus(), enabled=enabled)


def apply(pid: int, plan: CpuPlan) -> str:
    """Pin process ``pid`` to the plan's CPUs; returns "" or why not. Threads and children started afterwards
    inherit the set (SGLang starts its scheduler processes after its imports, well after this call)."""
    if plan.how in ("off", "unavailable") or not plan.cpus:
        return ""
    try:
        os.sched_setaffinity(pid, set(plan.cpus))
    except (AttributeError, OSError) as exc:
        return f"CPU affinity {plan.cpulist} not applied to pid {pid}: {exc}"
    return ""
