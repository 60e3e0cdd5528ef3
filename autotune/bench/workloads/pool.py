"""A seeded, lazily filtered order over a dataset's entries, shared by the dataset kinds.

The entries are visited in one seeded permutation; each visited entry either becomes a unit or is dropped for a
reason (counted). Unit ``i`` is the ``i``-th kept entry, so it depends only on the spec and ``i``, and only the
entries needed are tokenized (building 10,000 requests does not tokenize the whole file). Past the last kept entry
the units start over (a level then repeats earlier prompts; ``counts.wrapped`` says so, and the run's notes).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from autotune.bench.workloads.base import FilterCounts, Unit
from autotune.core.errors import BenchError

Judge = Callable[[int], "Unit | str"]  # entry index -> a unit, or the reason it is dropped


class FilteredPool:
    def __init__(self, size: int, seed: int, judge: Judge, what: str) -> None:
        self._order = np.random.default_rng([seed, 0x5A]).permutation(size)
        self._judge = judge
        self._pos = 0
        self._kept: list[Unit] = []
        self.counts = FilterCounts()
        self._what = what

    def _extend(self, want: int, batch: int = 256) -> None:
        while len(self._kept) < want and self._pos < len(self._order):
            end = min(self._pos + batch, len(self._order))
            for idx in self._order[self._pos : end]:
                got = self._judge(int(idx))
                if isinstance(got, str):
                    self.counts.drop(got)
                else:
                    self._kept.append(got)
            self._pos = end
        self.counts.kept = len(self._kept)

    def units(self, n: int, offset: int) -> list[Unit]:
        self._extend(offset + n)
        if not self._kept:
            raise BenchError(
                f"{self._what}: no entry passed the filters ({self.counts.dropped}); see docs/benchmark.md"
            )
        if offset + n > len(self._kept):
            self.counts.wrapped = True
        return [self._kept[i % len(self._kept)] for i in range(offset, offset + n)]
