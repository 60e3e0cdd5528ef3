"""What a level's traffic looked like: prompt and output lengths, and its prefix-reuse ratio.

The prefix-reuse ratio is the share of prompt units (characters of a text prompt, ids of an id prompt) that an ideal
prefix cache (unbounded, flushed before the level, as the client flushes it) would already hold when the request
arrives: prompts are cut into blocks of ``BLOCK_CHARS`` characters / ``BLOCK_IDS`` ids, a block counts as reused when
the same chain of blocks up to it (the same whole prefix) was sent earlier in the level. First turns of ShareGPT
give about 0; a conversation's later turns and a group's shared system prompt give the share they repeat.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from autotune.bench.types import TrafficStats
from autotune.bench.workloads.base import BenchRequest

BLOCK_CHARS = 64
BLOCK_IDS = 16


class PrefixTracker:
    """Counts, request by request, the prompt units an ideal prefix cache would hold."""

    def __init__(self) -> None:
        self._seen: set[bytes] = set()
        self.reused = 0
        self.total = 0

    def add(self, req: BenchRequest) -> None:
        text = req.text
        if text is not None:
            units, block = len(text), BLOCK_CHARS
            chunk = lambda a, b: text[a:b].encode("utf-8", "surrogatepass")  # noqa: E731
        else:
            raw = np.asarray(req.input_ids or (), dtype=np.int64).tobytes()
            units, block = len(req.input_ids or ()), BLOCK_IDS
            chunk = lambda a, b: raw[8 * a : 8 * b]  # noqa: E731
        self.total += units
        h = hashlib.blake2b(digest_size=16)  # the chain: block k's key covers the whole prefix up to it
        for start in range(0, units - block + 1, block):
            h.update(chunk(start, start + block))
            key = h.copy().digest()
            if key in self._seen:
                self.reused += block
            else:
                self._seen.add(key)

    @property
    def ratio(self) -> float:
        return self.reused / self.total if self.total else 0.0


def _pct(values: list[int]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    arr = np.asarray(values, dtype=np.float64)
    p50, p99 = np.percentile(arr, [50.0, 99.0])
    return float(arr.mean()), float(p50), float(p99)


def traffic_stats(requests: Iterable[BenchRequest]) -> TrafficStats:
    """Lengths (tokens as counted when built) and the ideal prefix-reuse ratio of ``requests`` in sending order."""
    tracker = PrefixTracker()
    prompt: list[int] = []
    output: list[int] = []
    for r in requests:
        tracker.add(r)
        prompt.append(r.prompt_len)
        output.append(r.max_new_tokens)
    pm, p50, p99 = _pct(prompt)
    om, o50, o99 = _pct(output)
    return TrafficStats(
        requests=len(prompt),
        prompt_tokens_mean=pm,
        prompt_tokens_median=p50,
        prompt_tokens_p99=p99,
        output_tokens_mean=om,
        output_tokens_median=o50,
        output_tokens_p99=o99,
        prefix_reuse=tracker.ratio,
    )
