"""A finished trial's record on its way from the trainable to the searcher.

Ray Tune carries only the metrics it shows (``objective0``, ``feasible``, ``outcome``, ``failure``) and a reference to
the record (``RECORD_REF``: the trial's id). The record and its server log wait in the study's inbox until the searcher
takes them on ``on_trial_complete``, stores them (``StudyStore.append``, durable) and then tells the sampler.

The inbox is a named Ray actor the driver creates before Ray Tune starts, on the driver's node (owned by the driver: it
goes away with it, and a lost GPU worker does not take it along); trainables find it by the study's owner tag, on
whatever node they run, so no file is shared between nodes.
``LocalInbox`` is the same without Ray (the search benchmark, tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import ray

from autotune.core.errors import AutotuneError
from autotune.core.placement import on_node, this_node

RECORD_REF = "record_ref"  # the reported metric that names the record: the trial's id


@dataclass(frozen=True)
class Delivery:
    record: dict[str, Any]  # TrialRecord.to_json()
    log_text: str = ""  # the server log, clipped by the replica (clip_log)


class Inbox(Protocol):
    def take(self, trial_id: str) -> Delivery | None: ...


class LocalInbox:
    """Records held in this process, by trial id."""

    def __init__(self) -> None:
        self._held: dict[str, Delivery] = {}

    def put(self, trial_id: str, record: dict[str, Any], log_text: str = "") -> None:
        self._held[trial_id] = Delivery(record, log_text)

    def take(self, trial_id: str) -> Delivery | None:
        return self._held.pop(trial_id, None)

    def report(self, trial_id: str, record: dict[str, Any], log_text: str = "") -> dict[str, Any]:
        """Hold a trial's record and return what a trainable reports to Tune for it (for callers without Ray: the
        search benchmark, tests)."""
        self.put(trial_id, record, log_text)
        return {RECORD_REF: trial_id}


_InboxActor = ray.remote(num_cpus=0)(LocalInbox)


def inbox_name(owner: str) -> str:
    return f"autotune-records-{owner}"


class RayInbox:
    """The driver's side of the study's inbox actor."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle  # keeps the actor alive while the searcher holds it

    def take(self, trial_id: str) -> Delivery | None:
        """The trial's record, or None when it never arrived or the actor does not answer (a lost cluster)."""
        try:
            return ray.get(self.handle.take.remote(trial_id), timeout=120)
        except Exception:  # noqa: BLE001 - any Ray error means the same here: the record is not there
            return None


def create(owner: str) -> RayInbox:
    """The study's inbox (named, owned by the driver), on the caller's node: were it placed on a GPU worker that is
    lost, every later trial's record would fail to arrive."""
    return RayInbox(_InboxActor.options(name=inbox_name(owner), **on_node(this_node())).remote())


def deliver(owner: str | None, trial_id: str, record: dict[str, Any], log_text: str) -> None:
    """Put a trial's record in its study's inbox and wait until it is held (before the trial reports to Tune)."""
    try:
        handle = ray.get_actor(inbox_name(owner or ""))
    except ValueError as exc:
        raise AutotuneError(
            f"the study's record inbox ({inbox_name(owner or '')}) is not running, so trial {trial_id}'s record "
            "cannot reach the driver; a trial reports only when started by autotune's driver (python -m autotune.search)"
        ) from exc
    ray.get(handle.put.remote(trial_id, record, log_text))
