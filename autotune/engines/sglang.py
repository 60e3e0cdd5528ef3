"""The real engine: ``python -m sglang.launch_server``, started as a subprocess on the GPU node.

SGLang is never imported here: the driver may be a CPU-only head node. The release is read from package metadata.
"""

from __future__ import annotations

import sys
from importlib import metadata

from autotune.engines.base import Engine
from autotune.engines.preflight import run_help
from autotune.engines.sglang_facts import FLAG_RENAMES


def installed_sglang_version() -> str:
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return "not installed"


class SGLangEngine(Engine):
    name = "sglang"
    simulated = False
    FLAG_ALIASES = FLAG_RENAMES

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    def command(self) -> tuple[str, ...]:
        return (self.python, "-m", "sglang.launch_server")

    def help_text(self, python: str) -> str:
        return run_help([python, "-m", "sglang.launch_server"])

    def release(self) -> str:
        return f"sglang {installed_sglang_version()}"
