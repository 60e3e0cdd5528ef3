"""A driver killed with SIGKILL mid-study loses no finished trial, and the rerun resumes and cleans up after it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import free_port
from tests.test_search_e2e import STUDY

pytestmark = pytest.mark.slow


def _cmd(space: Path, results: Path, registry: Path) -> tuple[list[str], dict[str, str]]:
    argv = [
        sys.executable,
        "-m",
        "autotune.search",
        "--space",
        str(space),
        "--finalists",
        "0",
        "--results-dir",
        str(results),
        "--dashboard-port",
        str(free_port()),
        "--serve-port",
        str(free_port()),
    ]
    return argv, {**os.environ, "PYTHONUNBUFFERED": "1", "AUTOTUNE_SERVER_REGISTRY": str(registry)}


def test_killed_driver_resumes_without_rerunning_or_leaking(tmp_path: Path) -> None:
    study = json.loads(json.dumps(STUDY))
    study["study"]["name"] = "killed"
    study["study"]["trials"] = 2  # killed after the first record: the rerun keeps it and runs the other
    study["params"]["mem_fraction_static"]["choices"] = [0.7, 0.8]  # no launch failures here
    space = tmp_path / "killed.yaml"
    space.write_text(yaml.safe_dump(study))
    results, registry = tmp_path / "results", tmp_path / "registry"
    records = results / "killed" / "trials.jsonl"

    argv, env = _cmd(space, results, registry)
    driver = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    request_pgid = driver.pid
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            if records.exists() and records.read_text().count("\n") >= 1:
                break
            time.sleep(0.2)
        assert records.exists(), driver.communicate(timeout=5)[0] if driver.poll() is not None else "no record"
        os.kill(driver.pid, signal.SIGKILL)  # the driver only: Ray and the servers are left as a crash leaves them
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    leftovers = subprocess.run(["pgrep", "-g", str(request_pgid)], capture_output=True, text=True).stdout.split()
    first = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(first) >= 1

    argv, env = _cmd(space, results, registry)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=420)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert f"{len(first)} finished trial(s) kept" in out
    final = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(final) == 2
    assert [r["trial_id"] for r in final[: len(first)]] == [r["trial_id"] for r in first], "finished trials re-run"
    assert not list(registry.glob("*.json")), "a server of this study is still registered as running"
    if leftovers:  # Ray's own head processes of the killed driver: not ours to keep
        subprocess.run(["kill", "-9", *leftovers], check=False)
