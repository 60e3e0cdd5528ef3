"""The shipped speculative study, run for real on the simulator, exports a deployable SGLang command, and
``python -m autotune.verify`` measures that export again.

The study file is search_spaces/speculative.yaml with two benchmark-only settings added (random weights and simulated
acceptance, as the GPU studies use), so the test sees them kept in the records and left out of launch.sh. The simulator
runs at time scale 100 instead of the file's 5: the figures come from its virtual clock, so the scale only sets how
long the study and the verify run take (docs/simulator.md). The study measures two of the file's four load levels.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autotune.core.site import MULTICAST_VARS
from tests.conftest import free_port

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("export-e2e")]  # one study for both tests
ROOT = Path(__file__).resolve().parents[2]
TIME_SCALE = 100  # simulated seconds per wall second; the figures do not depend on it
# The file's levels are 1, 8, 32, 128; the two top ones were ~3/4 of each benchmark's wall time (study and verify) and
# no check here reads a figure: the export and the verify run take the study's levels whatever they are
LEVELS = [1, 8]


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("e2e-export")
    data = yaml.safe_load((ROOT / "search_spaces" / "speculative.yaml").read_text())
    data["server"]["flags"]["load-format"] = "dummy"
    data["workload"]["properties"] = {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
    # the export is under test, not the SLOs: a loaded CPU must not leave the study without a feasible trial
    data["study"]["constraints"] = [{"metric": "ttft_ms.p99", "level": "max", "max": 1e9}]
    data["sim"]["time_scale"] = TIME_SCALE
    data["load_levels"] = LEVELS
    space = tmp / "speculative.yaml"
    space.write_text(yaml.safe_dump(data))
    env = {k: v for k, v in os.environ.items() if k not in MULTICAST_VARS and k not in ("PYTHON", "PORT", "HOST")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.search",
            "--space",
            str(space),
            "--finalists",
            "0",
            "--trials",
            "2",
            "--results-dir",
            str(tmp / "results"),
            "--dashboard-port",
            str(free_port()),
            "--serve-port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp / "results" / "speculative"


def test_launch_sh_dry_run_is_the_portable_sglang_command(study: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "PORT", "HOST", "DRY_RUN")}
    out = subprocess.run(
        ["bash", str(study / "best" / "launch.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
        check=True,
    ).stdout
    command = shlex.split(out.splitlines()[-1])
    start = command.index("-m")
    assert command[start - 1] == "python3" and command[start + 1] == "sglang.launch_server"
    assert not any(tok.startswith("/") for tok in command[:start]), "no absolute interpreter path"
    assert command[command.index("--model-path") + 1] == "/models/kimi-k2.5-int4"
    assert command[command.index("--port") + 1] == "30000" and "--nccl-port" not in command
    best = json.loads((study / "best" / "best.json").read_text())["best"]
    trial_port = best["argv"][best["argv"].index("--port") + 1]
    assert trial_port != "30000" and trial_port not in command
    assert "dummy" not in out and "SGLANG_SIMULATE_ACC_LEN" not in out
    assert not any(name in out for name in MULTICAST_VARS), "the site set no multicast variable: none exported"
    mem = command[command.index("--mem-fraction-static") + 1]
    assert len(mem.split(".")[-1]) <= 2, f"float at the precision searched, got {mem}"
    # the benchmark-only settings are kept in the record, and the report says what was measured with them
    assert best["env"]["SGLANG_SIMULATE_ACC_LEN"] == "3.0" and "--load-format" in best["argv"]
    report = (study / "best" / "report.md").read_text()
    assert "## Measured with; remove or re-measure on real weights" in report and "--load-format dummy" in report
    assert "Tuned on the simulator" in report


def test_verify_measures_the_export_again(study: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "autotune.verify", str(study), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    report = json.loads((tmp_path / "verify.json").read_text())
    assert proc.returncode == (0 if report["ok"] else 1), proc.stderr[-2000:]
    assert report["kind"] == "rehearsal" and not report["server_alive_after_teardown"]
    assert [lv["concurrency"] for lv in report["autotune"]["levels"]] == LEVELS  # the study's levels


def test_rayservice_of_the_simulated_study_validates_against_kuberay(study: Path) -> None:
    from tests.deploy.kuberay_schema import errors

    doc = yaml.safe_load((study / "best" / "rayservice.yaml").read_text())
    assert errors(doc) == []
    apps = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]
    served = yaml.safe_load((study / "best" / "serve_config.yaml").read_text())["applications"]
    assert apps == served and apps[0]["args"]["engine"] == "sglang"  # the SGLang server the study stands for
