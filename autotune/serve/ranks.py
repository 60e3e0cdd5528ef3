"""The other nodes of a multi-node server (``server.nnodes`` > 1): SGLang's node ranks above 0, each started by a small
Ray actor on its own bundle of the slot's placement group (one bundle per node, ``autotune.serve.app.slot_placement``).

The slot's replica runs node rank 0, which serves HTTP; it sets ``--node-rank`` and ``--dist-init-addr`` (its node's
address and a free port) on every rank's argv, starts the ranks here, and stops them with its own server. Each rank's
server runs in its own process session and is listed in its node's server registry under the study's tag, so the
orphan sweep of that node finds it if its actor dies; its log comes back to the replica (``log_tail``), and from there
to the trial's record.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import ray

from autotune.core.trial import LaunchSpec
from autotune.trial import registry
from autotune.trial.launcher import ServerProcess


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with ``flag value`` set (replaced where present, appended otherwise)."""
    out = list(argv)
    if flag in out:
        out[out.index(flag) + 1] = value
    else:
        out += [flag, value]
    return out


def rank_argv(argv: list[str], rank: int, dist_init_addr: str) -> list[str]:
    """The argv of node rank ``rank`` of a multi-node server whose rank 0 listens at ``dist_init_addr``."""
    return with_flag(with_flag(argv, "--node-rank", str(rank)), "--dist-init-addr", dist_init_addr)


@ray.remote(num_cpus=0)
class NodeRank:
    """Node rank ``rank`` of a multi-node server: starts its process on this node and stops it on request."""

    def __init__(self, spec: LaunchSpec, rank: int, log_path: str, owner: str | None) -> None:
        import socket

        self.node = socket.gethostname()
        self.rank = rank
        if owner:
            registry.sweep_orphans(owner)  # a rank of this study whose actor died, left on this node
        self.server = ServerProcess(spec, Path(log_path), owner=owner)
        self.server.start()

    def where(self) -> str:
        return f"{self.node} (pid {os.getpid()})"

    def alive(self) -> bool:
        return self.server.alive()

    def log_tail(self, lines: int = 60) -> str:
        return self.server.log_tail(lines)

    def stop(self) -> None:
        self.server.kill()
        self.server.stop(grace_s=0.0)


def start_ranks(spec: LaunchSpec, nnodes: int, log_path: Path, owner: str | None) -> list[Any]:
    """Start node ranks 1..``nnodes``-1 of ``spec`` (whose argv already names rank 0's ``--dist-init-addr``), rank
    ``r`` on bundle ``r`` of this replica's placement group; [] where the replica has no placement group."""
    if nnodes <= 1:  # a single-node server: nothing to ask of Ray
        return []
    from ray.util import get_current_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    pg = get_current_placement_group()
    if pg is None:
        return []
    per_node = spec.gpus // nnodes
    addr = spec.argv[spec.argv.index("--dist-init-addr") + 1]
    ranks = []
    for r in range(1, nnodes):
        rank_spec = dataclasses.replace(spec, argv=tuple(rank_argv(list(spec.argv), r, addr)))
        strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=r)
        ranks.append(
            NodeRank.options(num_gpus=per_node, num_cpus=1, scheduling_strategy=strategy).remote(  # type: ignore[attr-defined]  # @ray.remote makes the class an ActorClass; Ray's decorator is not typed as such
                rank_spec, r, str(log_path.with_name(f"{log_path.stem}.rank{r}.log")), owner
            )
        )
    return ranks


def stop_ranks(ranks: list[Any], timeout_s: float = 30.0) -> None:
    """Stop every rank's server, then its actor (a rank whose node is gone is skipped)."""
    refs = [r.stop.remote() for r in ranks]
    try:
        ray.get(refs, timeout=timeout_s)
    except Exception:  # noqa: BLE001 - a rank lost with its node; its node's sweep or its own exit covers it
        pass
    for r in ranks:
        try:
            ray.kill(r)
        except Exception:  # noqa: BLE001 - already gone
            pass


def rank_failure(ranks: list[Any], timeout_s: float = 10.0) -> tuple[int, str] | None:
    """The first rank whose server exited and its log tail; None while every rank runs (or Ray does not answer: rank 0
    notices a rank lost with its node)."""
    try:
        alive = ray.get([r.alive.remote() for r in ranks], timeout=timeout_s)
        dead = next((k for k, ok in enumerate(alive) if not ok), None)
        return None if dead is None else (dead + 1, ray.get(ranks[dead].log_tail.remote(), timeout=timeout_s))
    except Exception:  # noqa: BLE001 - a Ray error: no verdict, asked again on the next check
        return None


def rank_logs(ranks: list[Any], timeout_s: float = 30.0) -> str:
    """Each rank's log tail, headed by its rank and node, for the trial's record."""
    out = []
    for k, r in enumerate(ranks, start=1):
        try:
            where, tail = ray.get([r.where.remote(), r.log_tail.remote()], timeout=timeout_s)
        except Exception as exc:  # noqa: BLE001 - the rank's node is gone: say so in the record
            where, tail = "unreachable", f"({type(exc).__name__})"
        out.append(f"--- node rank {k} on {where} ---\n{tail}")
    return "\n".join(out)
