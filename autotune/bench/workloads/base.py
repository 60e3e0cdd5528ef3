"""The contract every workload kind implements, and the request it produces.

A kind turns a ``WorkloadSpec`` into *units*: one unit is what one client slot sends in order, a single request for
most kinds, a whole conversation (its turns in order, with a think time before each next turn) for ``multi-turn``.
Unit ``i`` depends only on the spec and ``i``, so a client can ask for more units mid-run (``offset``) and no level
repeats an earlier level's prompts. Bad input raises ``BenchError`` with one line naming what and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from autotune.bench.types import WorkloadSpec


@dataclass(frozen=True)
class BenchRequest:
    """One request: exactly one of ``input_ids`` / ``text`` is set. ``prompt_len`` is its length in tokens as counted
    when it was built (the model's tokenizer, or the stated rule of ``tokens.py``; 0 when not counted).
    ``arrival_s``: a trace row's own time (seconds from the trace's start); ``think_s``: the pause before this turn
    of a conversation is sent (after the previous turn's answer)."""

    input_ids: tuple[int, ...] | None
    text: str | None
    max_new_tokens: int
    prompt_len: int = 0
    arrival_s: float | None = None
    think_s: float = 0.0


Unit = tuple[BenchRequest, ...]


@dataclass
class FilterCounts:
    """What a dataset kind left out, by reason (``too_short``, ``over_context``, ``empty``), and what it kept;
    ``wrapped``: more units were asked for than it kept, so later units repeat earlier ones."""

    kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    wrapped: bool = False

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1


class WorkloadKind(Protocol):
    """One kind of traffic. ``check`` raises ``BenchError`` for a spec this kind cannot serve (before any request is
    built: ``--validate-only`` calls it); ``units`` builds units ``offset .. offset + n - 1``; ``filtered`` reports
    what the kind's filters left out (empty for generated kinds)."""

    name: str

    def check(self, spec: WorkloadSpec) -> None: ...

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]: ...

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None: ...
