"""``random``: random text (words, or the model's tokens decoded when its tokenizer is at hand) of a seeded length,
input and output lengths as ``random-ids`` draws them (SGLang ``bench_serving``'s ``random`` dataset). By the
simulator's rule the text is exactly the drawn length; with a model's tokenizer, decoded random ids re-tokenize to about
that length (as in bench_serving), and ``prompt_len`` records the drawn length."""

from __future__ import annotations

import numpy as np

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.random_ids import check_lengths, length
from autotune.bench.workloads.tokens import token_counter


class RandomText:
    name = "random"

    def check(self, spec: WorkloadSpec) -> None:
        check_lengths(spec)

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        counter = token_counter(spec.tokenizer)
        out: list[Unit] = []
        for i in range(offset, offset + n):
            rng = np.random.default_rng([spec.seed, i])
            n_in = length(rng, spec.input_len, spec.range_ratio)
            n_out = length(rng, spec.output_len, spec.range_ratio)
            out.append((BenchRequest(None, counter.random_text(rng, n_in), n_out, prompt_len=n_in),))
        return out

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        return None
