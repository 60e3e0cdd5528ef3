"""The study's GPU nodes while it runs: which node the driver is on, a watcher that follows nodes lost and joined (the
slot pool shrinks or grows with them, and each change is an infrastructure event the report lists), the searcher
wrapper that starts a trial only while a slot is free, and the end-of-study sweep of every node's server registry."""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune.search import ConcurrencyLimiter, Searcher

from autotune.core.placement import on_node, this_node
from autotune.trial import slots

TRIAL_RETRIES = 3  # how often Ray Tune reruns a trial whose node was lost (FailureConfig.max_failures)
EVENTS = "events.jsonl"  # results/<study>/: infrastructure events (nodes lost or joined), one JSON object a line


@dataclass(frozen=True)
class NodeEvent:
    """A GPU node that joined or was lost while the study ran (an infrastructure event, listed in the report)."""

    at: str  # ISO time
    kind: str  # "lost" | "joined"
    node_id: str
    address: str
    slots: tuple[int, ...]  # the slots it took away or brought
    trials: tuple[int, ...] = ()  # trials that were running on it (retried elsewhere)

    def text(self) -> str:
        where = f"node {self.node_id[:12]}" + (f" ({self.address})" if self.address else "")
        if self.kind == "lost":
            running = ""
            if self.trials:
                running = f"; trial(s) {', '.join(map(str, self.trials))} running there retried on another slot"
            return f"{self.at}: GPU {where} lost, its slot(s) {list(self.slots)} removed{running}"
        return f"{self.at}: GPU {where} joined, slot(s) {list(self.slots)} added"

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "kind": self.kind,
            "node_id": self.node_id,
            "address": self.address,
            "slots": list(self.slots),
            "trials": list(self.trials),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> NodeEvent:
        return cls(
            str(d["at"]),
            str(d["kind"]),
            str(d["node_id"]),
            str(d.get("address", "")),
            tuple(d["slots"]),
            tuple(d.get("trials", ())),
        )


def node_events(root: Path) -> list[str]:
    """The study's infrastructure events (``results/<study>/events.jsonl``), as sentences (every run of the study: the
    file is appended to)."""
    path = root / EVENTS
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(NodeEvent.from_json(json.loads(line)).text())
        except (ValueError, KeyError, TypeError):
            continue
    return out


class NodeWatcher:
    """Watch the cluster's GPU nodes while Tune runs: a lost node's slots leave the pool (their Serve apps are deleted:
    their placement groups cannot be placed again), a node that joins gets slots sized from its GPUs. ``on_event`` gets
    each change; ``capacity`` is how many slots the pool has now. Polls every ``period_s`` in a daemon thread."""

    def __init__(
        self,
        pool: Any,
        study: str,
        owner: str,
        gpus_per_node: int,
        on_event: Callable[[NodeEvent], None],
        *,
        nnodes: int = 1,
        period_s: float = 1.0,
    ) -> None:
        self.pool = pool
        self.study = study
        self.owner = owner  # the results folder: with the study, it names the slot applications
        self.gpus_per_node = gpus_per_node
        self.nnodes = nnodes
        self.on_event = on_event
        self.period_s = period_s
        self.known = {n.node_id: n for n in slots.live_gpu_nodes()}
        self.capacity = slots.size(pool) or 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="autotune-node-watcher", daemon=True)

    def __enter__(self) -> NodeWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a Ray hiccup: polled again; the RayWatchdog reports a lost cluster
                continue

    def poll(self) -> list[NodeEvent]:
        import ray
        from ray import serve

        now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        live = {n.node_id: n for n in slots.live_gpu_nodes()}
        events = []
        for node_id, node in self.known.items():
            if node_id in live:
                continue
            gone = ray.get(self.pool.drop_node.remote(node_id), timeout=30)
            for k in gone["slots"]:
                try:
                    serve.delete(slots.slot_app_name(self.study, self.owner, k), _blocking=False)
                except Exception:  # noqa: BLE001 - best effort: Serve's shutdown at the end removes it too
                    pass
            events.append(NodeEvent(now, "lost", node_id, node.address, tuple(gone["slots"]), tuple(gone["trials"])))
        for node_id, node in live.items():
            if node_id not in self.known and self.nnodes == 1:
                new = ray.get(self.pool.add_node.remote(node, self.gpus_per_node), timeout=30)
                events.append(NodeEvent(now, "joined", node_id, node.address, tuple(s.index for s in new)))
        self.known = live
        self.capacity = slots.size(self.pool) or 0
        for e in events:
            self.on_event(e)
        return events


class SlotLimiter(ConcurrencyLimiter):
    """Ray Tune's ``ConcurrencyLimiter`` whose limit is the GPU slots there are now (``capacity()``, which follows the
    nodes lost and joined), under the study's own cap. A trial that Tune reruns after its node was lost keeps its place.
    When every slot is gone and nothing runs, the search finishes with ``stop_reason``."""

    def __init__(self, searcher: Searcher, capacity: Callable[[], int], cap: int | None = None) -> None:
        self._capacity: Callable[[], int] | None = capacity
        self._cap = cap
        self.stop_reason = ""
        super().__init__(searcher, max_concurrent=max(1, self._limit()))

    def _limit(self) -> int:
        n = self._capacity() if self._capacity is not None else 1
        return min(n, self._cap) if self._cap else n

    @property
    def max_concurrent(self) -> int:
        return self._limit()

    @max_concurrent.setter
    def max_concurrent(self, value: int) -> None:
        pass  # the limit follows the slots; Tune's own setting is not used

    def suggest(self, trial_id: str) -> dict | None:
        if self._limit() <= 0 and not self.live_trials:
            self.stop_reason = (
                "no GPU slot is left: every GPU node of the Ray cluster was lost. Rerun the same command once nodes "
                "are back; finished trials are kept."
            )
            return Searcher.FINISHED  # type: ignore[return-value]  # Tune's sentinel is the str "FINISHED"
        return super().suggest(trial_id)

    def __getstate__(self) -> dict:
        """Ray Tune pickles the search algorithm with the experiment; the live capacity callback is not part of it."""
        state = self.__dict__.copy()
        state["_capacity"] = None
        return state

    def get_state(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in ("searcher", "_capacity")}
        return dict(state)


def driver_node(min_cpus: float) -> str | None:
    """The driver's Ray node, where it has at least ``min_cpus`` CPUs (the study's trial functions and slot pool are
    kept there, so a lost GPU worker does not take them with it); None otherwise (Ray places them)."""
    import ray

    here = this_node()
    for n in ray.nodes():
        if n.get("NodeID") == here and float(n.get("Resources", {}).get("CPU", 0)) >= min_cpus:
            return here
    return None


def sweep_every_node(owner: str, timeout_s: float = 60.0) -> int:
    """Kill the study's servers left on every live node (each node's own registry, ``autotune.trial.registry``);
    returns how many were killed. Runs one small task per node, pinned there."""
    import ray

    from autotune.trial import registry

    @ray.remote(num_cpus=0)
    def sweep(tag: str) -> int:
        return len(registry.sweep(tag))

    refs = [sweep.options(**on_node(n["NodeID"])).remote(owner) for n in ray.nodes() if n.get("Alive")]
    try:
        return int(sum(ray.get(refs, timeout=timeout_s)))
    except Exception:  # noqa: BLE001 - a node lost meanwhile; the driver's own sweep follows
        return 0
