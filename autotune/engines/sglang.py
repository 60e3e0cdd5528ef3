"""The real engine: ``python -m sglang.launch_server``, started as a subprocess on the GPU node.

SGLang is never imported here: the driver may be a CPU-only head node. The release is read from package metadata.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from typing import Any

from autotune.core import gpus as gpu_query
from autotune.engines.base import Engine, Identity, StudyEngine
from autotune.engines.memory import Sizes, from_model_dir
from autotune.engines.preflight import run_help
from autotune.engines.sglang_facts import FLAG_RENAMES
from autotune.engines.sglang_model import SGLANG


def installed_sglang_version() -> str:
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return "not installed"


class SGLangEngine(Engine):
    name = "sglang"
    simulated = False
    model = SGLANG
    FLAG_ALIASES = FLAG_RENAMES

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable

    @classmethod
    def for_study(cls, study: StudyEngine) -> SGLangEngine:
        return cls()

    def command(self) -> tuple[str, ...]:
        return (self.python, "-m", "sglang.launch_server")

    def help_text(self, python: str) -> str:
        return run_help([python, "-m", "sglang.launch_server"])

    def release(self) -> str:
        return f"sglang {installed_sglang_version()}"

    def memory_sizes(self, model_path: str, drafters: tuple[str, ...]) -> Sizes | None:
        """From the model directory's ``config.json`` and the smallest GPU memory ``nvidia-smi`` reports on this node
        (None without GPUs)."""
        rows = gpu_query.query("memory.total")
        if not rows:
            return None
        total = min(float(r[0]) for r in rows) * 1024 * 1024
        return from_model_dir(model_path, total, drafters=drafters)

    def identity(
        self,
        *,
        release: str | None,
        server_info: Mapping[str, Any],
        gpu_names: Sequence[str],
        gpus: int,
        declared_gpu: str | None = None,
    ) -> Identity:
        rel = str(release or self.release())
        return Identity(
            engine=self.name,
            version=str(server_info.get("version") or rel.replace("sglang ", "")),
            simulated=False,
            gpu_name=gpu_names[0] if gpu_names else "unknown GPU",
            gpu_count=len(gpu_names) or gpus,
        )
