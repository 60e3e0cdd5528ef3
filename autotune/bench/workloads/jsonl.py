"""``jsonl``: the user's own prompts, one JSON object a line, ``{"prompt": str}`` or ``{"input_ids": [int, ...]}``,
with an optional ``"max_new_tokens"`` (else ``output_len``); rows are cycled when more requests are needed. Blank
lines are skipped; a malformed line is an error naming the line and the reason."""

from __future__ import annotations

import dataclasses
import functools
import json
import os

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.tokens import token_counter
from autotune.core.errors import BenchError


class Jsonl:
    name = "jsonl"

    def check(self, spec: WorkloadSpec) -> None:
        load_jsonl(_path(spec), spec.output_len)

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        rows = load_jsonl(_path(spec), spec.output_len)
        counter = token_counter(spec.tokenizer)
        out: list[Unit] = []
        for i in range(offset, offset + n):
            r = rows[i % len(rows)]
            if r.text is not None and not r.prompt_len:
                r = dataclasses.replace(r, prompt_len=counter.count(r.text))
            out.append((r,))
        return out

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        return None


def _path(spec: WorkloadSpec) -> str:
    if not spec.path:
        raise BenchError("workload kind 'jsonl' needs a path: set workload.path to a JSONL file of prompts")
    return spec.path


def check_jsonl(path: str, default_max_new_tokens: int) -> int:
    """The number of requests in a JSONL workload file; raises BenchError naming the first bad line (or no rows)."""
    return len(load_jsonl(path, default_max_new_tokens))


def load_jsonl(path: str, default_max_new_tokens: int) -> tuple[BenchRequest, ...]:
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
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark from Windows tools is skipped
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
    return BenchRequest(input_ids=tuple(ids), text=None, max_new_tokens=max_new, prompt_len=len(ids))
