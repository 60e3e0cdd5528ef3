"""Cases 4 and 5 of the failure matrix, end to end on the simulator: a real driver is interrupted or loses its raylet.

Each test starts one driver (Ray on this machine) of a study whose environment holds a secret, stops it after its first
record, and checks the exit code, the banner of the partial export, that no file of the study holds the secret and, for
the lost raylet, that the same command resumes."""

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


TOKEN = "hf_e2eSecretValue0123456789"


def _start(
    tmp_path: Path, name: str, trials: int = 3, finalists: dict | None = None, wait_for: str = "trials.jsonl"
) -> tuple[list[str], dict[str, str], Path, subprocess.Popen[str]]:
    study = json.loads(json.dumps(STUDY))
    study["study"]["name"] = name
    study["study"]["trials"] = trials
    if finalists:
        study["study"]["finalists"] = finalists
    study["params"]["mem_fraction_static"]["choices"] = [0.7, 0.8]
    study["server"]["env"] = {"HF_TOKEN": TOKEN}  # case 4 end to end: no file of the study may hold it
    space = tmp_path / f"{name}.yaml"
    space.write_text(yaml.safe_dump(study, sort_keys=False))
    argv = [
        sys.executable,
        "-m",
        "autotune.search",
        "--space",
        str(space),
        *([] if finalists else ["--finalists", "0"]),
        "--results-dir",
        str(tmp_path / "results"),
        "--dashboard-port",
        str(free_port()),
        "--serve-port",
        str(free_port()),
        "--max-concurrent",
        "1",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AUTOTUNE_SERVER_REGISTRY": str(tmp_path / "registry")}
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    root = tmp_path / "results" / name
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (root / wait_for).exists() and (root / wait_for).read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.communicate()[0][-4000:]
    return argv, env, root, proc


def _finish(proc: subprocess.Popen[str], timeout_s: float = 90) -> str:
    try:
        return proc.communicate(timeout=timeout_s)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _cleanup_group(pgid: int) -> None:
    left = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout.split()
    if left:
        subprocess.run(["kill", "-9", *left], check=False)


def _assert_a_clean_partial_export(root: Path, out: str, sig: signal.Signals) -> None:
    """What every interrupted study leaves: no traceback, best/ under the banner, the stop with its signal, no secret."""
    assert "Tuner.restore" not in out and "core dumped" not in out and "*** SIG" not in out, out[-4000:]
    assert (root / "best" / "report.md").read_text().startswith(f"> **INTERRUPTED ({sig.name})")
    assert json.loads((root / "stops.jsonl").read_text().splitlines()[-1])["signal"] == sig.name
    leaks = [str(p) for p in root.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaks == [] and TOKEN not in out  # records, logs, study.json, Tune's folder, best/
    assert 'export HF_TOKEN="${HF_TOKEN:?' in (root / "best" / "launch.sh").read_text()


def test_sigterm_exports_partial_results_with_a_banner(tmp_path: Path) -> None:
    """SIGTERM during the trials (SIGINT is the finalist-stage test's): exit 143, best/ under the banner."""
    _, _, root, proc = _start(tmp_path, "stop15")
    os.kill(proc.pid, signal.SIGTERM)
    out = _finish(proc)
    _cleanup_group(proc.pid)
    assert proc.returncode == 143, out[-4000:]
    _assert_a_clean_partial_export(root, out, signal.SIGTERM)


def test_ctrl_c_in_the_finalist_stage_keeps_its_relaunches_and_exports_an_incomplete_stage(tmp_path: Path) -> None:
    """Ctrl-C while the finalists are relaunched: no new relaunch starts, the finished ones stay in finalists.jsonl,
    and best/ is exported under the banner with the stage marked incomplete (no winner declared)."""
    _, _, root, proc = _start(
        tmp_path, "finint", trials=2, finalists={"count": 2, "rounds": 2}, wait_for="finalists.jsonl"
    )
    os.kill(proc.pid, signal.SIGINT)
    out = _finish(proc)
    _cleanup_group(proc.pid)
    assert proc.returncode == 130, out[-4000:]
    runs = (root / "finalists.jsonl").read_text().splitlines()
    assert 1 <= len(runs) < 4, out[-4000:]
    best = json.loads((root / "best" / "best.json").read_text())
    assert best["decided_by"] == "incomplete" and f"{len(runs)} of 4 relaunches" in best["reason"], best["reason"]
    _assert_a_clean_partial_export(root, out, signal.SIGINT)


def _raylet_of(driver_pid: int) -> int:
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rfind(")") + 2 :].split()[1])
        if ppid == driver_pid and b"raylet" in cmd.split(b"\0")[0]:
            return int(d.name)
    raise AssertionError("the driver's raylet was not found")


def test_dead_raylet_is_an_infrastructure_stop_and_the_study_resumes(tmp_path: Path) -> None:
    argv, env, root, proc = _start(tmp_path, "raylet", trials=2)
    raylet = _raylet_of(proc.pid)
    listening = [
        ln.split()[3]
        for ln in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout.splitlines()
        if f"pid={raylet}," in ln
    ]
    assert listening and all("127.0.0.1" in a for a in listening), f"a local study's raylet listens on {listening}"
    os.kill(raylet, signal.SIGKILL)
    t0 = time.monotonic()
    out = _finish(proc, timeout_s=60)
    _cleanup_group(proc.pid)
    assert proc.returncode == 4, out[-4000:]
    assert time.monotonic() - t0 < 45, "the lost raylet was not noticed within seconds"
    assert "Ray cluster was lost" in out
    stop = json.loads((root / "stops.jsonl").read_text().splitlines()[-1])
    assert "raylet" in stop["infrastructure"]
    records = [json.loads(x) for x in (root / "trials.jsonl").read_text().splitlines()]
    assert all(r["failure"] != "unknown" for r in records), "the lost cluster was recorded as a trial failure"
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert f"{len(records)} finished trial(s) kept" in again.stdout
