"""Hands out a workload's units in order, across warmup and all levels (no level repeats a prompt), as request
bodies, and remembers the requests a level sent (for its traffic summary)."""

from __future__ import annotations

import collections
from dataclasses import dataclass

from autotune.bench.stream import request_body
from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import BenchRequest, Unit, build_units


@dataclass(frozen=True)
class Turn:
    body: bytes
    think_s: float
    request: BenchRequest


PreparedUnit = tuple[Turn, ...]


class RequestSource:
    def __init__(self, spec: WorkloadSpec) -> None:
        self._spec = spec
        self._queue: collections.deque[PreparedUnit] = collections.deque()
        self._built = 0
        self.sent: list[BenchRequest] = []  # requests sent since ``mark``, in sending order

    def _prepare(self, unit: Unit) -> PreparedUnit:
        return tuple(Turn(request_body(r, self._spec), r.think_s, r) for r in unit)

    def prefetch(self, n: int) -> None:
        missing = n - len(self._queue)
        if missing > 0:
            self._queue.extend(self._prepare(u) for u in build_units(self._spec, missing, offset=self._built))
            self._built += missing

    def next(self) -> PreparedUnit:
        if not self._queue:
            self.prefetch(64)
        return self._queue.popleft()

    def align(self, k: int) -> None:
        """Skip to the next unit whose index is a multiple of ``k`` (a trace's cycle: a window then replays the trace
        from its first row, not from wherever the warmup or the levels before left it)."""
        handed = self._built - len(self._queue)
        skip = -handed % k
        if skip >= len(self._queue):
            self._queue.clear()
            self._built = handed + skip
        else:
            for _ in range(skip):
                self._queue.popleft()

    def take(self, n: int) -> list[PreparedUnit]:
        self.prefetch(n)
        return [self.next() for _ in range(n)]

    def record(self, turn: Turn) -> None:
        """``turn`` is being sent (a unit handed out may not be sent whole: a window that stopped early, a
        conversation that ended at a failed turn)."""
        self.sent.append(turn.request)

    def mark(self) -> None:
        """Start remembering a new level's requests."""
        self.sent = []
