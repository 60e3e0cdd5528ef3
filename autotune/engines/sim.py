"""The simulated engine: ``python -m autotune.sim.server``, launched exactly like SGLang with the same flags.

Its results are SIMULATED (a performance model of a named profile), never measurements; every record says so.
"""

from __future__ import annotations

import sys

from autotune import __version__
from autotune.core.trial import FlagValue
from autotune.engines.base import Engine, flags_to_argv
from autotune.engines.preflight import run_help


class SimEngine(Engine):
    name = "sim"
    simulated = True
    cache_help = False

    def __init__(
        self,
        profile: str = "h200-llama-1b",
        time_scale: float = 1.0,
        seed: int | None = None,
        python: str | None = None,
    ) -> None:
        self.profile = profile
        self.time_scale = float(time_scale)
        self.seed = seed
        self.python = python or sys.executable

    def command(self) -> tuple[str, ...]:
        sim_flags: dict[str, FlagValue | None] = {"sim-profile": self.profile, "sim-time-scale": self.time_scale}
        if self.seed is not None:
            sim_flags["sim-seed"] = self.seed
        return (self.python, "-m", "autotune.sim.server", *flags_to_argv(sim_flags))

    def help_text(self, python: str) -> str:
        return run_help([python, "-m", "autotune.sim.server"], timeout_s=60)

    def release(self) -> str:
        return f"autotune-sim {__version__}"
