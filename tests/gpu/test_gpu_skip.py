"""The GPU tests' skip rule (CPU only): no nvidia-smi, a failing nvidia-smi, or no SGLang each give a reason."""

from __future__ import annotations

import subprocess

import pytest

from . import conftest


def test_no_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    assert conftest.gpu_skip_reason() == "no GPU: nvidia-smi not found"


def test_failing_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*a: object, **k: object) -> None:
        raise subprocess.CalledProcessError(9, "nvidia-smi")

    monkeypatch.setattr(conftest.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(conftest.subprocess, "run", fail)
    assert "nvidia-smi failed" in (conftest.gpu_skip_reason() or "")


def test_gpu_without_sglang_and_with_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conftest.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(conftest.subprocess, "run", lambda *a, **k: None)
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name: None)
    assert "SGLang is not installed" in (conftest.gpu_skip_reason() or "")
    monkeypatch.setattr(conftest.importlib.util, "find_spec", lambda name: object())
    assert conftest.gpu_skip_reason() is None
