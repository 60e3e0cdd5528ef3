"""tools/device/run_call_b.sh rehearsed on the CPU: a simulated study through the real script, packed as on the device.

The device machine keeps nothing, so whatever the script does not pack is lost: here a study renamed by
``--search-args "--study NAME"`` must come back with its records under that name (a real round lost a study's records
when the script packed the YAML's name instead)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # runs a simulated study: starts Ray
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_renamed_study_comes_back_with_its_records(tmp_path: Path) -> None:
    site, out, results = tmp_path / "site", tmp_path / "out", tmp_path / "results"
    (site / "sglang").mkdir(parents=True)
    for sets in (".device/whl", ".device-ray/whl"):  # pretend the wheel sets are installed (bootstrap's stamps)
        (site / (".bootstrap_ok." + "".join(c if c.isalnum() or c in "._-" else "_" for c in sets))).touch()
    env = {
        **os.environ,
        "OUT": str(out),
        "SGLDEV_SITE": str(site),
        "AUTOTUNE_MODELS_DIR": str(tmp_path / "models"),
        "PYTHON": sys.executable,
    }  # this interpreter, whichever python3 comes first on PATH
    proc = subprocess.run(
        [
            "bash", "tools/device/run_call_b.sh", "--deadline", "240", "--trials", "2", "--models", "llama-1b",
            "--results-dir", str(results), "--search-args",
            # no finalist stage, and the simulator paced 10x faster than smoke.yaml's (same figures): the packing is
            # under test here, not the study
            f"--study renamed-rehearsal --dashboard-port {free_port()} --serve-port {free_port()} --finalists 0 "
            "--time-scale 100",
            "search_spaces/smoke.yaml",
        ],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    packed = out / "study-renamed-rehearsal.tgz"
    assert packed.exists(), sorted(p.name for p in out.iterdir())
    with tarfile.open(packed) as tar:
        names = set(tar.getnames())
        prov = json.load(tar.extractfile("study-renamed-rehearsal/results/provenance.json"))  # type: ignore[arg-type]
    assert "study-renamed-rehearsal/results/trials.jsonl" in names
    assert "study-renamed-rehearsal/overhead.txt" in names
    assert "study-renamed-rehearsal/serve_timeline.txt" in names
    assert prov["engine"] == "sim" and "--study renamed-rehearsal" in prov["command"]
