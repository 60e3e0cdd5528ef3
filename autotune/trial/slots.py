"""GPU slots of a study: one long-lived Serve application per trial that can run at once, handed out to trials.

A slot is a placement group on the Ray node(s) that hold its GPUs: the slot application's replica is placed with one
bundle per node (the node's share of the slot's GPUs), each bundle pinned to its node by Ray's ``ray.io/node-id``
label, so a trial's server never spans nodes unless the study asks for multi-node SGLang (``server.nnodes``), and each
node's slots are sized from that node's own GPU count (:func:`plan_slots`). A trial deploys its engine onto a free
slot (``<study>-<id>-slot-<k>``, :func:`slot_app_name`) with ``serve.run``; Serve updates the slot's replica in place (``reconfigure``) instead of
starting a new Ray worker process for every trial.

The pool is a named Ray actor that the driver creates before Ray Tune starts and removes after it; trainables find it
by the study's owner tag. The driver's node watcher (``autotune.study.nodes.NodeWatcher``) tells it of nodes that join
(new slots) and nodes that are lost (their slots go; the trials that held them are retried elsewhere). Where there is
no pool (a trial run outside the driver), the runner deploys one application per trial as before.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace
from typing import Any

import ray

from autotune.core.errors import AutotuneError
from autotune.core.placement import on_node


@dataclass(frozen=True)
class NodeGpus:
    """A live Ray node and the GPUs it declares."""

    node_id: str
    gpus: int
    address: str = ""


@dataclass(frozen=True)
class Slot:
    """GPU slot ``index`` of the study: ``gpus`` GPUs on each node of ``nodes`` (one node per SGLang node rank; empty:
    anywhere, the pool of a trial run outside the driver's placement); ``local``/``node_slots``: its place among its
    first node's slots (its share of that node's CPUs, ``autotune.core.cpusets``)."""

    index: int
    nodes: tuple[str, ...]
    gpus: int
    local: int
    node_slots: int

    @property
    def node_id(self) -> str | None:
        return self.nodes[0] if self.nodes else None


def plan_slots(nodes: list[NodeGpus], gpus_per_node: int, first_index: int = 0, nnodes: int = 1) -> list[Slot]:
    """``floor(node GPUs / gpus_per_node)`` places on each node; with ``nnodes`` 1 each place is a slot, numbered from
    ``first_index`` in the nodes' order. With ``nnodes`` > 1 a slot takes one place on each of ``nnodes`` distinct
    nodes (the nodes with the most free places first), as many slots as the places allow."""
    if gpus_per_node <= 0 or nnodes <= 0:
        return []
    places = {n.node_id: n.gpus // gpus_per_node for n in nodes}
    out: list[Slot] = []
    if nnodes == 1:
        for node in nodes:
            n, base = places[node.node_id], first_index + len(out)
            out += [Slot(base + k, (node.node_id,), gpus_per_node, k, n) for k in range(n)]
        return out
    used = dict.fromkeys(places, 0)
    order = [n.node_id for n in nodes]
    while True:
        free = sorted((nid for nid in order if places[nid] - used[nid] > 0), key=lambda nid: used[nid] - places[nid])
        if len(free) < nnodes:
            return out
        group = tuple(sorted(free[:nnodes], key=order.index))
        first = group[0]
        out.append(Slot(first_index + len(out), group, gpus_per_node, used[first], places[first]))
        for nid in group:
            used[nid] += 1


def take(plan: list[Slot], cap: int | None) -> list[Slot]:
    """At most ``cap`` slots of ``plan`` (all where ``cap`` is None), taken across the nodes first; each kept slot's
    ``local``/``node_slots`` counted again among the kept slots of its first node, so that a node's CPUs are cut into
    as many parts as the study has slots there (a slot left alone on its node gets them all)."""
    kept = sorted(plan, key=lambda sl: sl.local)[:cap]
    mates = {nid: [sl for sl in kept if sl.node_id == nid] for nid in {sl.node_id for sl in kept}}
    return [replace(sl, local=mates[sl.node_id].index(sl), node_slots=len(mates[sl.node_id])) for sl in kept]


def pool_name(owner: str) -> str:
    return f"autotune-slots-{owner}"


def slot_app_name(study: str, owner: str, slot: int) -> str:
    """``<study>-<id>-slot-<k>``, ``<id>`` from the results folder (``owner``): two drivers of one study name on one
    cluster, from two folders, keep apart, and a study resumed from its folder takes back the slots it left."""
    return f"{study}-{hashlib.sha256(owner.encode()).hexdigest()[:6]}-slot-{slot}"


@ray.remote(num_cpus=0)
class SlotPool:
    def __init__(self, slots: list[Slot] | int) -> None:
        if isinstance(slots, int):  # n slots anywhere (one node, or a trial run outside the driver's placement)
            slots = [Slot(k, (), 0, k, slots) for k in range(slots)]
        self.slots: dict[int, Slot] = {s.index: s for s in slots}
        self.free = sorted(self.slots)
        self.held: dict[int, int | None] = {}  # slot -> the trial number holding it
        self.lost: dict[int, int | None] = {}  # slot -> the trial its runner saw interrupted by a node's loss
        self.next_index = max(self.slots, default=-1) + 1  # never reused: a lost slot's index names only that slot

    def size(self) -> int:
        """How many slots the study has now."""
        return len(self.slots)

    def slot(self, index: int) -> Slot | None:
        return self.slots.get(index)

    def nodes(self) -> list[str]:
        return sorted({nid for s in self.slots.values() for nid in s.nodes})

    def try_acquire(self, number: int | None = None) -> int | None:
        if not self.free:
            return None
        slot = self.free.pop(0)
        self.held[slot] = number
        return slot

    def release(self, slot: int) -> None:
        self.held.pop(slot, None)
        if slot in self.lost:  # its node is gone: it waits for drop_node, never handed out again
            return
        if slot in self.slots and slot not in self.free:
            self.free.append(slot)
            self.free.sort()

    def interrupted(self, slot: int) -> None:
        """The runner of the trial on ``slot`` saw its node lost (it may release the slot before the driver's watcher
        drops the node): :meth:`drop_node` still names the trial, and the slot is not handed out again meanwhile."""
        if slot in self.held and slot in self.slots:
            self.lost[slot] = self.held[slot]

    def add_node(self, node: NodeGpus, gpus_per_node: int) -> list[Slot]:
        """Slots for a node that joined the cluster (none where it already has some), numbered after every slot the
        study has had (a lost slot's number, and its Serve app name, are not given to another). A single-node slot per
        place; multi-node studies get no slot from a lone joining node."""
        if node.node_id in self.nodes():
            return []
        new = plan_slots([node], gpus_per_node, first_index=self.next_index)
        self.next_index += len(new)
        for s in new:
            self.slots[s.index] = s
            self.free.append(s.index)
        self.free.sort()
        return new

    def drop_node(self, node_id: str) -> dict[str, Any]:
        """Forget the slots on a lost node; returns them and the trials that held them (retried elsewhere)."""
        gone = sorted(i for i, s in self.slots.items() if node_id in s.nodes)
        trials = [self.held.pop(i) if i in self.held else self.lost.get(i) for i in gone
                  if i in self.held or i in self.lost]  # fmt: skip
        for i in gone:
            self.lost.pop(i, None)
            del self.slots[i]
        self.free = [i for i in self.free if i in self.slots]
        return {"slots": gone, "trials": [t for t in trials if t is not None]}


def create(owner: str, slots: list[Slot] | int, node_id: str | None = None) -> Any:
    """The study's pool (named, owned by the driver: it goes away with the driver), on node ``node_id`` if given (the
    driver's: a lost GPU worker must not take the pool with it)."""
    return SlotPool.options(name=pool_name(owner), **on_node(node_id)).remote(slots)  # type: ignore[attr-defined]  # @ray.remote makes the class an ActorClass; Ray's decorator is not typed as such


def find(owner: str | None) -> Any | None:
    if not owner:
        return None
    try:
        return ray.get_actor(pool_name(owner))
    except ValueError:
        return None


def size(pool: Any) -> int | None:
    """How many slots the pool has; None where the pool does not answer (the CPU sets then fall back to one part)."""
    try:
        return int(ray.get(pool.size.remote(), timeout=30))
    except Exception:  # noqa: BLE001 - an older pool or a Ray error: CPU isolation is best effort
        return None


def describe(pool: Any, slot: int) -> Slot | None:
    """Where slot ``slot`` is; None where the pool does not answer or the slot went with its node."""
    try:
        return ray.get(pool.slot.remote(slot), timeout=30)
    except Exception:  # noqa: BLE001 - the caller deploys without a node pin, as a single-node pool does
        return None


def live_gpu_nodes() -> list[NodeGpus]:
    """The cluster's live nodes that declare GPUs, in a stable order (Ray's node list)."""
    out = []
    for n in ray.nodes():
        gpus = int(float(n.get("Resources", {}).get("GPU", 0)))
        if n.get("Alive") and gpus > 0:
            out.append(NodeGpus(n["NodeID"], gpus, str(n.get("NodeManagerAddress", ""))))
    return out


def node_lost(nodes: tuple[str, ...], wait_s: float = 60.0, poll_s: float = 1.0) -> str:
    """Which of ``nodes`` is gone, as a sentence (empty: all alive). Ray marks a node dead some seconds after its
    raylet stops, so a failed call on it is checked for up to ``wait_s``."""
    if not nodes:
        return ""
    deadline = time.monotonic() + wait_s
    while True:
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        dead = [nid for nid in nodes if nid not in alive]
        if dead:
            return f"Ray node {dead[0][:12]} was lost"
        if time.monotonic() > deadline:
            return ""
        time.sleep(poll_s)


def acquire(pool: Any, timeout_s: float = 600.0, poll_s: float = 0.1, number: int | None = None) -> int:
    """A free slot; the driver starts no more trials than there are slots, so the wait is short (longer only while a
    lost node's trial waits for the slots that remain)."""
    deadline = time.monotonic() + timeout_s
    while True:
        slot = ray.get(pool.try_acquire.remote(number))
        if slot is not None:
            return int(slot)
        if time.monotonic() > deadline:
            raise AutotuneError(
                f"no free GPU slot after {timeout_s:g} s: more trials run at once than the study has "
                "slots (a bug, or every GPU node was lost: see the driver's output)"
            )
        time.sleep(poll_s)
