"""A load level: a closed-loop concurrency, a request rate (open loop), or a trace's own timing (open loop).

- ``Load.closed(c)``: ``c`` workers, each sending its next request when its previous one ends (key: ``c``, an int,
  as levels have always been keyed).
- ``Load.at_rate(r, burstiness=b)``: requests arrive at ``r`` requests/s (engine seconds), whatever the server does;
  the gaps are drawn as SGLang ``bench_serving`` draws them: gamma with shape ``b`` and scale ``1 / (r * b)``, so
  ``b = 1`` is a Poisson process, ``b < 1`` burstier, ``b > 1`` more regular (key: ``"rate8"``, ``"rate32b0.5"``).
- ``Load.replay(s)``: requests at the trace workload's own timestamps times ``s`` (0.5 = twice as fast; key
  ``"trace"`` for 1, else ``"trace0.5"``).

Arrival times are a pure function of the load, the seed and the window, so a level is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

LoadKind = Literal["concurrency", "rate", "trace"]
LevelKey = int | str


@dataclass(frozen=True)
class Load:
    kind: LoadKind
    concurrency: int = 0  # kind concurrency
    rate: float = 0.0  # kind rate: requests per engine second
    burstiness: float = 1.0  # kind rate: the gamma shape (1 = Poisson)
    time_scale: float = 1.0  # kind trace: multiplies the trace's timestamps

    @classmethod
    def closed(cls, concurrency: int) -> Load:
        return cls("concurrency", concurrency=concurrency)

    @classmethod
    def at_rate(cls, rate: float, burstiness: float = 1.0) -> Load:
        return cls("rate", rate=float(rate), burstiness=float(burstiness))

    @classmethod
    def replay(cls, time_scale: float = 1.0) -> Load:
        return cls("trace", time_scale=float(time_scale))

    @property
    def open_loop(self) -> bool:
        return self.kind != "concurrency"

    @property
    def key(self) -> LevelKey:
        if self.kind == "concurrency":
            return self.concurrency
        if self.kind == "rate":
            return f"rate{self.rate:g}" + ("" if self.burstiness == 1.0 else f"b{self.burstiness:g}")
        return "trace" if self.time_scale == 1.0 else f"trace{self.time_scale:g}"

    def check(self) -> str | None:
        """What is wrong with this load, in one line, or None."""
        if self.kind == "concurrency" and self.concurrency < 1:
            return f"a concurrency level must be an integer >= 1, got {self.concurrency}"
        if self.kind == "rate":
            if not (self.rate > 0 and math.isfinite(self.rate)):
                return f"a request rate must be a finite number > 0 requests/s, got {self.rate:g}"
            if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
                return f"burstiness must be > 0 (1 = Poisson, < 1 burstier), got {self.burstiness:g}"
        if self.kind == "trace" and not (self.time_scale > 0 and math.isfinite(self.time_scale)):
            return f"a trace level's time_scale must be > 0 (1 = as recorded), got {self.time_scale:g}"
        return None


def arrival_times(load: Load, n: int, seed: int, window: int = 0) -> np.ndarray:
    """The ``n`` arrival times (engine seconds from the window's start, the first at 0) of a rate level."""
    if load.kind != "rate":
        raise ValueError(f"arrival_times is for rate levels, not {load.kind}")
    if n <= 0:
        return np.zeros(0)
    rng = np.random.default_rng([seed, window, 0xA7])
    gaps = rng.gamma(shape=load.burstiness, scale=1.0 / (load.rate * load.burstiness), size=n - 1)
    return np.concatenate([[0.0], np.cumsum(gaps)])


def trace_times(arrivals: Sequence[float], load: Load) -> np.ndarray:
    """A trace level's send times: the rows' own times from the first, times the level's ``time_scale``."""
    arr = np.asarray(arrivals, dtype=np.float64)
    return (arr - arr[0]) * load.time_scale if arr.size else arr


def sort_key(key: LevelKey) -> tuple[int, float, str]:
    """Concurrency levels first by concurrency, then rate levels by rate, then trace levels."""
    if isinstance(key, int):
        return (0, float(key), "")
    if key.startswith("rate"):
        num = key[4:].split("b", 1)[0]
        try:
            return (1, float(num), key)
        except ValueError:
            return (1, 0.0, key)
    return (2, 0.0, key)
