"""The real engine: ``python -m sglang.launch_server``, started as a subprocess on the GPU node.

SGLang is never imported here: the driver may be a CPU-only head node. The release is read from package metadata.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from importlib import metadata

from autotune.engines.base import RAY_INJECTED_ENV, SAFE_ENV, Engine, flags_to_argv
from autotune.engines.preflight import run_help
from autotune.trial import LaunchSpec, TrialConfig


def installed_sglang_version() -> str:
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return "not installed"


def server_env(cfg_env: Mapping[str, str]) -> dict[str, str]:
    """The variables autotune sets for a server: the safe defaults, then the trial's own."""
    env = dict(SAFE_ENV)
    env.update(cfg_env)
    return env


class SGLangEngine(Engine):
    name = "sglang"
    simulated = False
    # (name in the study, name in another release). 0.5.23 made --cuda-graph-max-bs ambiguous; <=0.5.10 lacks -decode.
    FLAG_ALIASES = (
        ("cuda-graph-max-bs", "cuda-graph-max-bs-decode"),
        ("cuda-graph-max-bs-decode", "cuda-graph-max-bs"),
        ("server-info", "get-server-info"),
    )

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def launch_spec(
        self, cfg: TrialConfig, *, port: int, nccl_port: int | None = None, ready_timeout_s: float = 900.0
    ) -> LaunchSpec:
        flags: dict[str, object] = {"model-path": cfg.model_path, "tp-size": cfg.tp_size}
        flags.update(cfg.flags)
        flags.update({"host": cfg.host, "port": port})
        if nccl_port is not None:
            flags["nccl-port"] = nccl_port
        argv = (self.python, "-m", "sglang.launch_server", *flags_to_argv(flags))  # type: ignore[arg-type]
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
        return run_help([python, "-m", "sglang.launch_server"])

    def release(self) -> str:
        return f"sglang {installed_sglang_version()}"
