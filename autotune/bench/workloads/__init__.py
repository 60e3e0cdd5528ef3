"""Workload kinds: a ``WorkloadSpec`` -> the requests a benchmark sends, seeded and deterministic.

One module per kind, each behind ``KINDS`` (a new kind is one file plus its entry here):

- ``random-ids`` (``synthetic``, its older name): random token ids (``random_ids.py``)
- ``random``: random text (``random_text.py``)
- ``jsonl``: the user's own prompts (``jsonl.py``)
- ``sharegpt``: ShareGPT conversations' first turns, as bench_serving takes them (``sharegpt.py``)
- ``multi-turn``: whole ShareGPT conversations, history in context, think time between turns (``multi_turn.py``)
- ``shared-prefix``: groups sharing a system prompt, SGLang's generated-shared-prefix (``shared_prefix.py``)
- ``trace``: a Mooncake-format JSONL trace with its timestamps and shared blocks (``trace.py``)

``build_units(spec, n, offset=k)`` gives units ``k .. k + n - 1`` (a unit is a request, or a conversation's turns);
``build_requests`` the same flattened to requests. ``summary.py`` summarises the lengths and prefix reuse sent.
"""

from __future__ import annotations

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit, WorkloadKind
from autotune.bench.workloads.jsonl import Jsonl, check_jsonl
from autotune.bench.workloads.multi_turn import MultiTurn
from autotune.bench.workloads.random_ids import RandomIds
from autotune.bench.workloads.random_text import RandomText
from autotune.bench.workloads.shared_prefix import SharedPrefix
from autotune.bench.workloads.sharegpt import ShareGpt
from autotune.bench.workloads.trace import Trace
from autotune.core.errors import BenchError

KINDS: dict[str, WorkloadKind] = {
    "random-ids": RandomIds(),
    "synthetic": RandomIds(),
    "random": RandomText(),
    "jsonl": Jsonl(),
    "sharegpt": ShareGpt(),
    "multi-turn": MultiTurn(),
    "shared-prefix": SharedPrefix(),
    "trace": Trace(),
}
KIND_NAMES = tuple(KINDS)


def kind_of(spec: WorkloadSpec) -> WorkloadKind:
    try:
        return KINDS[spec.kind]
    except KeyError:
        raise BenchError(f"unknown workload kind {spec.kind!r}: use one of {', '.join(KIND_NAMES)}") from None


def check_workload(spec: WorkloadSpec) -> None:
    """Raise ``BenchError`` (one line) for a spec its kind cannot serve: a missing file, a malformed row, bad sizes."""
    kind = kind_of(spec)
    if spec.seed < 0:
        raise BenchError(f"workload seed must be an integer >= 0 (it seeds NumPy's generators), got {spec.seed!r}")
    kind.check(spec)


def build_units(spec: WorkloadSpec, n: int, *, offset: int = 0) -> list[Unit]:
    """Units ``offset .. offset + n - 1`` of the workload ``spec``."""
    if n < 0 or offset < 0:
        raise ValueError(f"n and offset must be >= 0 (got n={n}, offset={offset})")
    check_workload(spec)
    return kind_of(spec).units(spec, n, offset)


def build_requests(spec: WorkloadSpec, n: int, *, offset: int = 0) -> list[BenchRequest]:
    """The requests of units ``offset .. offset + n - 1`` in order (a conversation's turns one after another)."""
    return [r for unit in build_units(spec, n, offset=offset) for r in unit]


def filter_counts(spec: WorkloadSpec) -> FilterCounts | None:
    """What the kind's filters dropped so far, by reason (None for generated kinds)."""
    return kind_of(spec).filtered(spec)


__all__ = [
    "KINDS",
    "KIND_NAMES",
    "BenchRequest",
    "FilterCounts",
    "Unit",
    "build_requests",
    "build_units",
    "check_jsonl",
    "check_workload",
    "filter_counts",
    "kind_of",
]
