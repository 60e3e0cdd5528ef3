"""Case 3 of the failure matrix: the orphan sweep signals only the servers it started, from a directory of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.trial import registry


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        os.killpg(proc.pid, 9)
        proc.wait()


def _regdir(tmp_path: Path) -> Path:
    d = tmp_path / "reg"
    d.mkdir(mode=0o700)
    return d


def test_planted_entry_naming_an_unrelated_process_is_not_signalled(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    reg = _regdir(tmp_path)
    # a stale or planted file: right owner, a live group, but no identity recorded at launch
    (reg / f"{sleeper.pid}.json").write_text(json.dumps({"pgid": sleeper.pid, "owner": "study-a", "argv": ["x"]}))
    assert registry.sweep("study-a", reg) == []
    assert sleeper.poll() is None
    assert not list(reg.glob("*.json")), "the untrusted entry is forgotten"


def test_reused_pid_is_not_signalled(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    reg = _regdir(tmp_path)
    path = registry.register(sleeper.pid, "study-a", ["x"], reg)
    entry = json.loads(path.read_text())
    entry["start_ticks"] -= 1  # the registered server started earlier: this pid now belongs to another process
    path.write_text(json.dumps(entry))
    assert registry.sweep("study-a", reg) == []
    assert sleeper.poll() is None


def test_other_command_line_is_not_signalled(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    reg = _regdir(tmp_path)
    path = registry.register(sleeper.pid, "study-a", ["x"], reg)
    entry = json.loads(path.read_text())
    entry["cmdline"] = ["python", "-m", "sglang.launch_server"]
    path.write_text(json.dumps(entry))
    assert registry.sweep("study-a", reg) == []
    assert sleeper.poll() is None


def test_registered_server_is_killed(tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    reg = _regdir(tmp_path)
    registry.register(sleeper.pid, "study-a", ["x"], reg)
    assert [k["pgid"] for k in registry.sweep("study-a", reg)] == [sleeper.pid]
    assert sleeper.wait(timeout=10) == -9


def test_registry_dir_refuses_a_symlink(tmp_path: Path) -> None:
    target = _regdir(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(registry.RegistryError, match="symlink"):
        registry.register(os.getpid(), "s", ["x"], link)
    with pytest.raises(registry.RegistryError, match="symlink"):
        registry.sweep("s", link)


def test_registry_dir_refuses_another_users_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = _regdir(tmp_path)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(reg).st_uid + 1)
    with pytest.raises(registry.RegistryError, match="belongs to uid"):
        registry.sweep("s", reg)


def test_registry_dir_is_per_user_and_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AUTOTUNE_SERVER_REGISTRY", raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing"))
    assert registry.default_dir() == Path(f"/tmp/autotune-servers-{os.getuid()}")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert registry.default_dir() == tmp_path / "autotune-servers"
    made = registry.safe_dir(tmp_path / "autotune-servers")
    assert made.stat().st_mode & 0o777 == 0o700
