"""The default first run (``python -m autotune.search``: the smoke study on the simulator) shows tuning: its best beats
its seed point (the baseline) and its worst point by margins larger than their intervals, and the console summary says
so. Slow: one real study, Ray + Serve + simulated servers (run under ``flock /tmp/autotune-ray.lock``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

pytestmark = pytest.mark.slow


def test_the_default_study_beats_its_seed_and_its_worst_point_beyond_the_noise(tmp_path: Path) -> None:
    results = tmp_path / "results"
    t0 = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.search",
            "--results-dir",
            str(results),
            "--dashboard-port",
            str(free_port()),
            "--serve-port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    wall = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    doc = json.loads((results / "smoke" / "best" / "best.json").read_text())
    records = [json.loads(line) for line in (results / "smoke" / "trials.jsonl").read_text().splitlines()]
    distinct = {json.dumps(r["params"], sort_keys=True) for r in records}
    assert len(distinct) >= len(records) - 2, "the default study re-measures measured points"
    base = doc["baseline"]
    assert base["kind"] == "beats", doc["verdict"]
    top = next(g for g in base["gains"] if g["concurrency"] == 64)
    assert top["separable"] and top["gain_low_pct"] > 0, top  # the whole interval of the gain above zero
    worst = doc["best_vs_worst"]
    assert worst["separable"] and worst["low_pct"] > 0, worst
    assert worst["gain_pct"] > top["gain_pct"]  # the worst point is further below than the seed
    # the console summary states it, with the intervals
    assert "verdict: Recommended: trial" in out and "beats your current configuration" in out, out[-4000:]
    assert "vs the worst config (trial" in out
    print(
        f"default study: {wall:.0f} s wall; gain over the seed {top['gain_pct']:+.1f}% "
        f"[{top['gain_low_pct']:+.1f}, {top['gain_high_pct']:+.1f}]; over the worst {worst['gain_pct']:+.1f}%"
    )
