"""``trace``: replay of a Mooncake-format JSONL trace, one request a line:
``{"timestamp": <ms>, "input_length": <tokens>, "output_length": <tokens>, "hash_ids": [<int>, ...]}``
(``hash_ids`` optional). Timestamps are milliseconds and must not decrease; the first row is time 0.

Prompts are token ids: block ``h`` of ``hash_ids`` is ``trace_block_size`` ids drawn from a generator seeded by
``(seed, cycle, h)``, so rows naming the same hash id share that block (a prefix cache reuses it, as in the trace);
ids past the named blocks are the row's own. Past the trace's last row the rows start over in a new *cycle*, with
new blocks and times continuing after the trace's span. A row whose input + output exceeds ``context_len`` is
dropped (``over_context``, counted). Sent at the trace's own times under a ``{trace: ...}`` load level
(``autotune/bench/load.py``), or closed-loop under a concurrency level.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass

import numpy as np

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.random_ids import MIN_TOKEN_ID
from autotune.core.errors import BenchError


@dataclass(frozen=True)
class TraceRow:
    t_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _int(row: dict, key: str, where: str, minimum: int) -> int:
    v = row.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise BenchError(f'{where}: "{key}" must be an integer >= {minimum}, got {v!r}')
    return v


def load_trace(path: str | None) -> tuple[TraceRow, ...]:
    if not path:
        raise BenchError("workload kind 'trace' needs a path: set workload.path to a Mooncake-format JSONL trace")
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BenchError(f"trace file {path}: cannot read it ({exc.strerror}); check workload.path") from exc
    return _parse(path, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=4)
def _parse(path: str, _mtime: int, _size: int) -> tuple[TraceRow, ...]:
    rows: list[TraceRow] = []
    first: float | None = None
    prev = -1.0
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark from Windows tools is skipped
            for lineno, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                where = f"trace file {path}, line {lineno}"
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise BenchError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
                if not isinstance(row, dict):
                    raise BenchError(f"{where}: expected a JSON object, got {type(row).__name__}")
                ts = row.get("timestamp")
                if isinstance(ts, bool) or not isinstance(ts, (int, float)) or ts < 0:
                    raise BenchError(f'{where}: "timestamp" must be a number of milliseconds >= 0, got {ts!r}')
                if ts < prev:
                    raise BenchError(
                        f"{where}: timestamp {ts} is before the previous row's {prev}; sort the trace by timestamp"
                    )
                prev = float(ts)
                first = prev if first is None else first
                hashes = row.get("hash_ids", [])
                if not isinstance(hashes, list) or not all(
                    isinstance(h, int) and not isinstance(h, bool) for h in hashes
                ):
                    raise BenchError(f'{where}: "hash_ids" must be a list of integers')
                rows.append(
                    TraceRow(
                        (prev - first) / 1000.0,
                        _int(row, "input_length", where, 1),
                        _int(row, "output_length", where, 1),
                        tuple(hashes),
                    )
                )
    except UnicodeDecodeError as exc:
        raise BenchError(f"trace file {path}: not UTF-8 text ({exc.reason})") from exc
    if not rows:
        raise BenchError(f'trace file {path}: no rows; write one JSON object a line with "timestamp", "input_length"')
    return tuple(rows)


def _span(rows: tuple[TraceRow, ...]) -> float:
    """One cycle's length: the trace's span plus its mean gap (so a cycle's first row does not land on the last)."""
    gap = rows[-1].t_s / (len(rows) - 1) if len(rows) > 1 else 1.0
    return rows[-1].t_s + gap


class Trace:
    name = "trace"

    def check(self, spec: WorkloadSpec) -> None:
        if spec.trace_block_size < 1:
            raise BenchError(f"workload trace_block_size must be >= 1, got {spec.trace_block_size}")
        rows = load_trace(spec.path)
        if spec.context_len is not None and all(r.input_length + r.output_length > spec.context_len for r in rows):
            raise BenchError(f"trace file {spec.path}: every row exceeds context_len={spec.context_len}")

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        rows = load_trace(spec.path)
        kept = [r for r in rows if spec.context_len is None or r.input_length + r.output_length <= spec.context_len]
        span = _span(rows)
        out: list[Unit] = []
        blocks: dict[tuple[int, int], list[int]] = {}
        for i in range(offset, offset + n):
            cycle, j = divmod(i, len(kept))
            r = kept[j]
            ids: list[int] = []
            for h in r.hash_ids:
                if len(ids) >= r.input_length:
                    break
                if (cycle, h) not in blocks:
                    rng = np.random.default_rng([spec.seed, cycle, h & 0x7FFFFFFFFFFFFFFF, 0x7B])
                    blocks[(cycle, h)] = rng.integers(MIN_TOKEN_ID, spec.vocab_size, spec.trace_block_size).tolist()
                ids.extend(blocks[(cycle, h)])
            if len(ids) < r.input_length:
                rng = np.random.default_rng([spec.seed, i, 0x7C])
                ids.extend(rng.integers(MIN_TOKEN_ID, spec.vocab_size, r.input_length - len(ids)).tolist())
            ids = ids[: r.input_length]
            out.append(
                (BenchRequest(tuple(ids), None, r.output_length, prompt_len=len(ids), arrival_s=cycle * span + r.t_s),)
            )
        return out

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        rows = load_trace(spec.path)
        counts = FilterCounts()
        for r in rows:
            if spec.context_len is not None and r.input_length + r.output_length > spec.context_len:
                counts.drop("over_context")
            else:
                counts.kept += 1
        return counts
