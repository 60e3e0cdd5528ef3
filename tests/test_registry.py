from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from autotune import registry


def test_sweep_kills_only_the_owners_live_groups(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
             for _ in range(2)]
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
