"""What nvidia-smi says about a node's GPUs, read without a GPU (``gpus.query`` faked)."""

from __future__ import annotations

import pytest

from autotune.core import gpus
from autotune.trial.launcher import wait_gpus_free


def test_memory_in_use_by_index_or_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpus, "query", lambda fields: [["0", "GPU-a", "12.0"], ["1", "GPU-b", "40000"]])
    assert gpus.memory_used_mib() == {"0": 12, "1": 40000}
    assert gpus.memory_used_mib(["GPU-b"]) == {"1": 40000}


def test_memory_nvidia_smi_does_not_report_is_unknown_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    # unified-memory GPUs (GB10) answer memory.used with [N/A]: the GPU-free wait before a launch cannot tell, and skips
    monkeypatch.setattr(gpus, "query", lambda fields: [["0", "GPU-a", "[N/A]"]])
    assert gpus.memory_used_mib(["0"]) is None
    assert wait_gpus_free(["0"], timeout_s=0.1) is None
