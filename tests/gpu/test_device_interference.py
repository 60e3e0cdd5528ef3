"""tools/device/interference.py end to end on the simulated server (CPU only): two servers, alone / isolated / shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools.device.interference import render, repin, tree_tids

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_protocol_runs_on_the_simulator(tmp_path: Path) -> None:
    model = tmp_path / "model"
    subprocess.run(
        [sys.executable, "-m", "autotune.models.dummy", "llama-1b", str(model)],
        check=True,
        capture_output=True,
        cwd=ROOT,
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            "tools/device/interference.py",
            "--engine",
            "sim",
            "--model-dir",
            str(model),
            "--out",
            str(out),
            "--rounds",
            "1",
            "--concurrency",
            "1,8",
            "--client-args",
            "--input-len 32 --output-len 16 --windows 2,2 --min-duration 0.2 --warmup 1",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "interference.json").read_text())
    assert [(r["phase"], r["servers"]) for r in doc["runs"]] == [
        ("alone", [0]),
        ("alone", [1]),
        ("isolated", [0, 1]),
        ("shared", [0, 1]),
    ]
    assert doc["levels"] == [1, 8]
    for r in doc["runs"]:
        for res in r["results"]:
            assert [lv["concurrency"] for lv in res["levels"]] == [1, 8]
            assert all(lv["output_tok_per_s"] > 0 and lv["failed"] == 0 for lv in res["levels"])
    # the two halves are disjoint where the machine has two CPUs or more, and the servers were pinned to them
    cpus = os.sched_getaffinity(0)
    if len(cpus) >= 2:
        assert doc["cpus"][0] != doc["cpus"][1]
        assert doc["servers"][0]["cmd"][:3] == ["taskset", "-c", doc["cpus"][0]]
    assert all(p["threads"] >= 1 for p in doc["threads_pinned"])
    md = (out / "interference.md").read_text()
    assert "| isolated 1 | A |" in md and "- shared: c=1:" in md


def test_repin_reaches_threads_of_child_processes() -> None:
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)",
        ]
    )
    try:
        deadline = time.monotonic() + 10
        while len(tree_tids(child.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        tids = tree_tids(child.pid)
        assert len(tids) >= 2  # the process and its grandchild at least
        one = {min(os.sched_getaffinity(0))}
        assert repin(child.pid, tuple(one)) == len(tids)
        assert all(os.sched_getaffinity(t) == one for t in tids)
    finally:
        for t in tree_tids(child.pid)[1:]:
            try:
                os.kill(t, 9)
            except (ProcessLookupError, PermissionError):
                pass
        child.kill()
        child.wait()


def test_render_gives_ratios_to_alone() -> None:
    def res(tok: float) -> dict:
        return {
            "levels": [
                {
                    "concurrency": 4,
                    "output_tok_per_s": tok,
                    "intervals": {"output_tok_per_s": {"low": tok - 1, "high": tok + 1, "n": 2}},
                    "ttft_ms": {"p99": 10.0},
                }
            ]
        }

    doc = {
        "engine": "sim",
        "model_dir": "m",
        "gpus": "0,0",
        "cpus": ["0", "1"],
        "all_cpus": "0-1",
        "levels": [4],
        "runs": [
            {"phase": "alone", "round": None, "servers": [0], "results": [res(100.0)]},
            {"phase": "alone", "round": None, "servers": [1], "results": [res(200.0)]},
            {"phase": "shared", "round": 1, "servers": [0, 1], "results": [res(50.0), res(150.0)]},
        ],
    }
    md = render(doc)
    assert "| shared 1 | A | 50 [49 .. 51] (0.50x) |" in md
    assert "| shared 1 | B | 150 [149 .. 151] (0.75x) |" in md
    assert "- shared: c=4: 0.625x (min 0.500, max 0.750, n 2)" in md
