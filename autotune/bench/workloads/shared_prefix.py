"""``shared-prefix``: groups of requests sharing a system prompt, SGLang ``bench_serving``'s generated-shared-prefix
dataset (``--gsp-num-groups``, ``--gsp-prompts-per-group``, ``--gsp-system-prompt-len``, ``--gsp-question-len``,
``--gsp-output-len``: here ``gsp_groups``, ``gsp_prompts_per_group``, ``gsp_system_len``, ``gsp_question_len`` and
``output_len``).

The units come in cycles of ``groups x prompts_per_group``; within a cycle the (group, question) pairs are in a seeded
order, and each cycle draws new system prompts, so a later level never reuses an earlier level's prefixes. A prompt is
the group's system prompt, a newline, then its own random question (random text as ``random`` makes it).
"""

from __future__ import annotations

import numpy as np

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.tokens import token_counter
from autotune.core.errors import BenchError


class SharedPrefix:
    name = "shared-prefix"

    def check(self, spec: WorkloadSpec) -> None:
        for key in ("gsp_groups", "gsp_prompts_per_group", "gsp_system_len", "gsp_question_len", "output_len"):
            if getattr(spec, key) < 1:
                raise BenchError(f"shared-prefix workload needs {key} >= 1, got {getattr(spec, key)}")

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        counter = token_counter(spec.tokenizer)
        per_cycle = spec.gsp_groups * spec.gsp_prompts_per_group
        systems: dict[tuple[int, int], str] = {}
        orders: dict[int, np.ndarray] = {}
        out: list[Unit] = []
        for i in range(offset, offset + n):
            cycle, j = divmod(i, per_cycle)
            if cycle not in orders:
                orders[cycle] = np.random.default_rng([spec.seed, cycle, 0x6A]).permutation(per_cycle)
            group = int(orders[cycle][j]) // spec.gsp_prompts_per_group
            if (cycle, group) not in systems:
                rng = np.random.default_rng([spec.seed, cycle, group, 0x5F])
                systems[(cycle, group)] = counter.random_text(rng, spec.gsp_system_len)
            question = counter.random_text(np.random.default_rng([spec.seed, i, 0x51]), spec.gsp_question_len)
            text = f"{systems[(cycle, group)]}\n{question}"
            n_in = spec.gsp_system_len + spec.gsp_question_len + 1
            out.append((BenchRequest(None, text, spec.output_len, prompt_len=n_in),))
        return out

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        return None
