"""Workloads: a WorkloadSpec -> the requests a benchmark sends, seeded and deterministic.

Request ``i`` of a workload depends only on the spec and ``i`` (never on how the requests were batched), so a client can
ask for more requests mid-run with ``offset`` and a level never repeats an earlier level's prompts (which a prefix cache
would otherwise serve for free).

- ``synthetic``: input ids drawn uniformly from ``[10, vocab_size)`` (low ids are often special tokens: BOS, EOS, pad),
  input and output lengths uniform in ``[max(1, int(len * (1 - range_ratio))), len]``. This is SGLang's ``random-ids``
  dataset with ``--random-range-ratio = 1 - range_ratio``.
- ``jsonl``: one JSON object a line, ``{"prompt": str}`` or ``{"input_ids": [int, ...]}``, with an optional
  ``"max_new_tokens"`` (else ``output_len``); rows are cycled when more requests are needed. Blank lines are skipped.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass

import numpy as np

from autotune.bench.types import WorkloadSpec
from autotune.core.errors import BenchError

MIN_TOKEN_ID = 10  # ids below this are left out: tokenizers treat many of them specially


@dataclass(frozen=True)
class BenchRequest:
    """One request: exactly one of ``input_ids`` / ``text`` is set."""

    input_ids: tuple[int, ...] | None
    text: str | None
    max_new_tokens: int


def build_requests(spec: WorkloadSpec, n: int, *, offset: int = 0) -> list[BenchRequest]:
    """Requests ``offset .. offset + n - 1`` of the workload ``spec``."""
    if n < 0 or offset < 0:
        raise ValueError(f"n and offset must be >= 0 (got n={n}, offset={offset})")
    if spec.kind == "synthetic":
        _check_synthetic(spec)
        return [_synthetic(spec, i) for i in range(offset, offset + n)]
    if spec.kind == "jsonl":
        if not spec.path:
            raise BenchError("workload kind 'jsonl' needs a path: set workload.path to a JSONL file of prompts")
        rows = _load_jsonl(spec.path, spec.output_len)
        return [rows[i % len(rows)] for i in range(offset, offset + n)]
    raise BenchError(f"unknown workload kind {spec.kind!r}: use 'synthetic' or 'jsonl'")


def _check_synthetic(spec: WorkloadSpec) -> None:
    if spec.input_len < 1 or spec.output_len < 1:
        raise BenchError(
            f"synthetic workload needs input_len >= 1 and output_len >= 1 (got {spec.input_len}, {spec.output_len})"
        )
    if not 0.0 <= spec.range_ratio <= 1.0:
        raise BenchError(f"workload range_ratio must be in [0, 1] (0 = fixed lengths), got {spec.range_ratio}")
    if spec.vocab_size <= MIN_TOKEN_ID:
        raise BenchError(f"workload vocab_size must be > {MIN_TOKEN_ID} (got {spec.vocab_size}): use the model's vocab")


def _length(rng: np.random.Generator, full: int, range_ratio: float) -> int:
    low = max(int(full * (1.0 - range_ratio)), 1)
    return int(rng.integers(low, full + 1))


def _synthetic(spec: WorkloadSpec, index: int) -> BenchRequest:
    rng = np.random.default_rng([spec.seed, index])
    n_in = _length(rng, spec.input_len, spec.range_ratio)
    n_out = _length(rng, spec.output_len, spec.range_ratio)
    ids = rng.integers(MIN_TOKEN_ID, spec.vocab_size, size=n_in)
    return BenchRequest(input_ids=tuple(ids.tolist()), text=None, max_new_tokens=n_out)


def check_jsonl(path: str, default_max_new_tokens: int) -> int:
    """The number of requests in a JSONL workload file; raises BenchError naming the first bad line (or no rows)."""
    return len(_load_jsonl(path, default_max_new_tokens))


def _load_jsonl(path: str, default_max_new_tokens: int) -> tuple[BenchRequest, ...]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BenchError(f"workload file {path}: cannot read it ({exc.strerror}); check workload.path") from exc
    return _parse_jsonl(path, st.st_mtime_ns, st.st_size, default_max_new_tokens)


@functools.lru_cache(maxsize=8)
def _parse_jsonl(path: str, _mtime_ns: int, _size: int, default_max_new_tokens: int) -> tuple[BenchRequest, ...]:
    """Parsed once per (file version, default); the mtime and size key the cache."""
    rows: list[BenchRequest] = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, start=1):
                if line.strip():
                    rows.append(_parse_row(path, lineno, line, default_max_new_tokens))
    except OSError as exc:
        raise BenchError(f"workload file {path}: cannot read it ({exc.strerror}); check workload.path") from exc
    except UnicodeDecodeError as exc:
        raise BenchError(f"workload file {path}: not UTF-8 text ({exc.reason}); save it as UTF-8 JSONL") from exc
    if not rows:
        raise BenchError(f'workload file {path}: no rows; write one JSON object a line, e.g. {{"prompt": "..."}}')
    return tuple(rows)


def _parse_row(path: str, lineno: int, line: str, default_max_new_tokens: int) -> BenchRequest:
    where = f"workload file {path}, line {lineno}"
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BenchError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(row, dict):
        raise BenchError(f'{where}: expected a JSON object like {{"prompt": "..."}}, got {type(row).__name__}')
    has_prompt, has_ids = "prompt" in row, "input_ids" in row
    if has_prompt == has_ids:
        raise BenchError(f'{where}: needs exactly one of "prompt" (a string) or "input_ids" (a list of ints)')
    max_new = row.get("max_new_tokens", default_max_new_tokens)
    if isinstance(max_new, bool) or not isinstance(max_new, int) or max_new < 1:
        raise BenchError(f'{where}: "max_new_tokens" must be a positive integer, got {max_new!r}')
    if has_prompt:
        prompt = row["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise BenchError(f'{where}: "prompt" must be a non-empty string')
        return BenchRequest(input_ids=None, text=prompt, max_new_tokens=max_new)
    ids = row["input_ids"]
    if (
        not isinstance(ids, list)
        or not ids
        or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in ids)
    ):
        raise BenchError(f'{where}: "input_ids" must be a non-empty list of non-negative integers')
    return BenchRequest(input_ids=tuple(ids), text=None, max_new_tokens=max_new)
