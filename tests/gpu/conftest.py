"""GPU tests: run only where ``nvidia-smi`` works and SGLang is installed; skipped everywhere else.

On the lent H200 (see tools/device/README.md): ``python -m pytest tests/gpu -m gpu``. Server logs go to
``$AUTOTUNE_GPU_TEST_LOGS`` when set (run_call_b.sh collects them), else to pytest's temporary directory; the dummy
models to ``$AUTOTUNE_MODELS_DIR`` when set (shared with the studies), else to a temporary directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from autotune.models.dummy import write_model

GPU_MODELS = ("llama-1b", "eagle3-llama-1b", "llama-8b")


def gpu_skip_reason() -> str | None:
    """Why GPU tests cannot run here, or None when they can."""
    if shutil.which("nvidia-smi") is None:
        return "no GPU: nvidia-smi not found"
    try:
        subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"no GPU: nvidia-smi failed ({type(exc).__name__})"
    if importlib.util.find_spec("sglang") is None:
        return "SGLang is not installed (pip install -e .[sglang], or tools/device/bootstrap.sh on the lent H200)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    reason = gpu_skip_reason()
    if reason is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def dummy_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the dummy-weight models the GPU tests serve (one sub-directory per shape)."""
    root = Path(os.environ.get("AUTOTUNE_MODELS_DIR") or tmp_path_factory.mktemp("models"))
    for shape in GPU_MODELS:
        write_model(shape, root / shape)
    return root


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = Path(os.environ.get("AUTOTUNE_GPU_TEST_LOGS") or tmp_path_factory.mktemp("server-logs"))
    path.mkdir(parents=True, exist_ok=True)
    return path
