"""Time in the simulated engine: the ``Pacer`` that releases virtual time to the wall clock (``time_scale`` virtual
seconds per wall second; it never changes a figure) and the seeded ``Noise`` on each iteration's duration."""

from __future__ import annotations

import random
import time


class Pacer:
    """Maps virtual time to the wall time at which it is released: ``time_scale`` virtual seconds per wall second."""

    def __init__(self, time_scale: float) -> None:
        self.scale = time_scale
        self.epoch0 = time.time()
        self._wall = time.monotonic()
        self._virtual = 0.0

    def anchor(self, virtual: float) -> None:
        self._wall, self._virtual = time.monotonic(), virtual

    def wall_at(self, virtual: float) -> float:
        return self._wall + (virtual - self._virtual) / self.scale

    def virtual_at(self, wall: float) -> float:
        return self._virtual + (wall - self._wall) * self.scale


class Noise:
    """Deterministic multiplicative noise on step durations: a slow component (per simulated second) and a fast one."""

    def __init__(self, level: float, seed: int) -> None:
        self.level = level
        self._rng = random.Random(seed * 7919 + 17)
        self._window = -1
        self._slow = 0.0

    def factor(self, sim_time: float) -> float:
        if self.level <= 0:
            return 1.0
        window = int(sim_time)
        if window != self._window:
            self._window = window
            self._slow = 0.6 * self._slow + 0.8 * self._rng.gauss(0.0, 1.0)
        return max(0.5, 1.0 + self.level * (0.8 * self._slow + 0.4 * self._rng.gauss(0.0, 1.0)))
