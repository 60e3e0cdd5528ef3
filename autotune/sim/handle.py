"""What the simulated engine publishes for its HTTP handlers and ``/metrics``: a request's ``Handle`` (its tokens and
their virtual times so far, and a wake-up event) and the engine's lifetime ``Counters``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from autotune.sim.scheduler import SimRequest


@dataclass(eq=False)
class Handle:
    """A request as its HTTP handler sees it: what the engine has published so far, plus a wake-up event.

    ``output``, ``events`` and ``finished_at`` change only when an iteration's end is processed, never ahead of the
    virtual clock (the scheduler plans an iteration's tokens at its start).
    """

    req: SimRequest
    arrival: float  # virtual time the request joins the timeline
    tagged: bool = False  # sent under the virtual-clock protocol: its end makes the engine expect the next request
    event: asyncio.Event = field(default_factory=asyncio.Event)
    aborted: bool = False
    notify_after: float = 0.0  # wall (monotonic) time before which new tokens do not wake the handler
    output: int = 0
    verify_ct: int = 0
    accepted_drafts: int = 0
    finished_at: float | None = None
    events: list[tuple[float, int]] = field(default_factory=list)  # (virtual end of an iteration, tokens so far)
    _taken: int = 0

    @property
    def finished(self) -> bool:
        return self.finished_at is not None

    def take_events(self) -> list[tuple[float, int]]:
        """The (time, completion tokens) pairs published since the previous call."""
        new = self.events[self._taken :]
        self._taken = len(self.events)
        return new


@dataclass
class Counters:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    finished_requests: int = 0
    verify_calls: int = 0
    accepted_tokens: int = 0  # tokens produced by verify steps (for the lifetime accept length)
    retractions: int = 0
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    last_gen_throughput: float = 0.0
