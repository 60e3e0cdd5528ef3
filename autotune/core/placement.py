"""Where a Ray actor or task of the study runs: pinned to one node (hard affinity), so that it lives and dies with
that node only (the driver's pieces on the driver's node; a sweep task on the node it sweeps)."""

from __future__ import annotations

from typing import Any


def this_node() -> str:
    """The Ray node of the calling process."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


def on_node(node_id: str | None) -> dict[str, Any]:
    """Ray ``.options()`` that keep an actor or task on node ``node_id``; none (Ray places it) where it is None."""
    if node_id is None:
        return {}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False)}
