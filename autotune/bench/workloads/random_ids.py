"""``random-ids`` (also spelled ``synthetic``): input ids drawn uniformly from ``[10, vocab_size)`` (low ids are often
special tokens: BOS, EOS, pad), input and output lengths uniform in ``[max(1, int(len * (1 - range_ratio))), len]``.
This is SGLang ``bench_serving``'s ``random-ids`` dataset with ``--random-range-ratio = 1 - range_ratio``."""

from __future__ import annotations

import numpy as np

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.core.errors import BenchError

MIN_TOKEN_ID = 10  # ids below this are left out: tokenizers treat many of them specially


def check_lengths(spec: WorkloadSpec) -> None:
    if spec.input_len < 1 or spec.output_len < 1:
        raise BenchError(
            f"{spec.kind} workload needs input_len >= 1 and output_len >= 1 (got {spec.input_len}, {spec.output_len})"
        )
    if not 0.0 <= spec.range_ratio <= 1.0:
        raise BenchError(f"workload range_ratio must be in [0, 1] (0 = fixed lengths), got {spec.range_ratio}")


def length(rng: np.random.Generator, full: int, range_ratio: float) -> int:
    low = max(int(full * (1.0 - range_ratio)), 1)
    return int(rng.integers(low, full + 1))


class RandomIds:
    name = "random-ids"

    def check(self, spec: WorkloadSpec) -> None:
        check_lengths(spec)
        if spec.vocab_size <= MIN_TOKEN_ID:
            raise BenchError(
                f"workload vocab_size must be > {MIN_TOKEN_ID} (got {spec.vocab_size}): use the model's vocab"
            )

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        return [(self._one(spec, i),) for i in range(offset, offset + n)]

    @staticmethod
    def _one(spec: WorkloadSpec, index: int) -> BenchRequest:
        rng = np.random.default_rng([spec.seed, index])
        n_in = length(rng, spec.input_len, spec.range_ratio)
        n_out = length(rng, spec.output_len, spec.range_ratio)
        ids = rng.integers(MIN_TOKEN_ID, spec.vocab_size, size=n_in)
        return BenchRequest(input_ids=tuple(ids.tolist()), text=None, max_new_tokens=n_out, prompt_len=n_in)

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        return None
