"""The simulated engine: ``python -m autotune.sim.server``, launched exactly like SGLang with the same flags.

Its results are SIMULATED (a performance model of a named profile), never measurements; every record says so.
"""

from __future__ import annotations

import sys

from autotune import __version__
from autotune.engines.base import RAY_INJECTED_ENV, Engine, flags_to_argv
from autotune.engines.preflight import run_help
from autotune.engines.sglang import server_env
from autotune.trial import LaunchSpec, TrialConfig


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

    def launch_spec(
        self, cfg: TrialConfig, *, port: int, nccl_port: int | None = None, ready_timeout_s: float = 900.0
    ) -> LaunchSpec:
        sim_flags: dict[str, object] = {"sim-profile": self.profile, "sim-time-scale": self.time_scale}
        if self.seed is not None:
            sim_flags["sim-seed"] = self.seed
        flags: dict[str, object] = {"model-path": cfg.model_path, "tp-size": cfg.tp_size}
        flags.update(cfg.flags)
        flags.update({"host": cfg.host, "port": port})
        if nccl_port is not None:
            flags["nccl-port"] = nccl_port
        argv = (
            self.python,
            "-m",
            "autotune.sim.server",
            *flags_to_argv(sim_flags),  # type: ignore[arg-type]
            *flags_to_argv(flags),  # type: ignore[arg-type]
        )
        return LaunchSpec(
            engine=self.name,
            argv=argv,
            env=server_env(cfg.env),
            host=cfg.host,
            port=port,
            gpus=cfg.gpus,
            unset_env=tuple(v for v in RAY_INJECTED_ENV if v not in cfg.env),
            ready_timeout_s=ready_timeout_s,
        )

    def help_text(self, python: str) -> str:
        return run_help([python, "-m", "autotune.sim.server"], timeout_s=60)

    def release(self) -> str:
        return f"autotune-sim {__version__}"
