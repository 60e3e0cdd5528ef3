"""GPU slots of a study: one long-lived Serve application per trial that can run at once, handed out to trials.

A trial deploys its engine onto a free slot (``<study>-slot-<k>``) with ``serve.run``; Serve updates the slot's replica
in place (``reconfigure``) instead of starting a new Ray worker process for every trial. The pool is a named Ray actor
that the driver creates before Ray Tune starts and removes after it; trainables find it by the study's owner tag. Where
there is no pool (a trial run outside the driver), the runner deploys one application per trial as before.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from autotune.core.errors import AutotuneError


def pool_name(owner: str) -> str:
    return f"autotune-slots-{owner}"


def slot_app_name(study: str, slot: int) -> str:
    return f"{study}-slot-{slot}"


@ray.remote(num_cpus=0)
class SlotPool:
    def __init__(self, n: int) -> None:
        self.free = list(range(n))
        self.n = n

    def size(self) -> int:
        """How many slots the study has (a slot's share of its node's CPUs, autotune.core.cpusets)."""
        return self.n

    def try_acquire(self) -> int | None:
        return self.free.pop(0) if self.free else None

    def release(self, slot: int) -> None:
        if 0 <= slot < self.n and slot not in self.free:
            self.free.append(slot)
            self.free.sort()


def create(owner: str, n: int) -> Any:
    """The study's pool of ``n`` slots (named, owned by the driver: it goes away with the driver)."""
    return SlotPool.options(name=pool_name(owner)).remote(n)  # type: ignore[attr-defined]  # @ray.remote makes the class an ActorClass; Ray's decorator is not typed as such


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


def acquire(pool: Any, timeout_s: float = 600.0, poll_s: float = 0.1) -> int:
    """A free slot; Ray Tune runs at most as many trials at once as there are slots, so the wait is short."""
    deadline = time.monotonic() + timeout_s
    while True:
        slot = ray.get(pool.try_acquire.remote())
        if slot is not None:
            return int(slot)
        if time.monotonic() > deadline:
            raise AutotuneError(
                f"no free GPU slot after {timeout_s:g} s: more trials run at once than the study has "
                "slots (a bug: report it with the driver's output)"
            )
        time.sleep(poll_s)
