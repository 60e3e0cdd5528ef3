from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from autotune.trial import registry


def test_sweep_kills_only_the_owners_live_groups(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        for _ in range(2)
    ]
    try:
        registry.register(procs[0].pid, "study-a", ["x"], tmp_path)
        registry.register(procs[1].pid, "study-b", ["y"], tmp_path)
        registry.register(999_999_999 % 4_000_000 + 3_000_000, "study-a", ["gone"], tmp_path)  # a dead entry
        killed = registry.sweep("study-a", tmp_path)
        assert [k["argv"] for k in killed] == [["x"]]
        procs[0].wait(timeout=10)
        time.sleep(0.1)
        assert procs[1].poll() is None, "another study's server must be left alone"
        assert sorted(p.name for p in tmp_path.iterdir()) == [f"{procs[1].pid}.json"]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()


def test_sweep_orphans_kills_only_servers_whose_replica_died(tmp_path: Path) -> None:
    dead_parent = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_parent.wait()
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
        for _ in range(3)
    ]
    try:
        registry.register(procs[0].pid, "study-a", ["orphan"], tmp_path, parent=dead_parent.pid)
        registry.register(procs[1].pid, "study-a", ["live replica"], tmp_path, parent=os.getpid())
        registry.register(procs[2].pid, "study-b", ["other study"], tmp_path, parent=dead_parent.pid)
        killed = registry.sweep_orphans("study-a", tmp_path)
        assert [k["argv"] for k in killed] == [["orphan"]]
        procs[0].wait(timeout=10)
        time.sleep(0.1)
        assert procs[1].poll() is None and procs[2].poll() is None
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{p.pid}.json" for p in procs[1:])
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
