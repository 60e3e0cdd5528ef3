"""launch.sh is the portable SGLang command without benchmark-only settings; rehearse_sim.sh is the simulator as measured.

The real runs use a stub ``sglang.launch_server`` module (on PYTHONPATH) that writes down its argv and environment.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autotune.export.command import exported_server
from autotune.export.errors import ExportError
from autotune.export.launch_script import render_launch_script, render_rehearsal_script
from tests.export.conftest import with_argv

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

ODD_VALUE = 'it\'s $HOME "quoted" `not run` ; rm -rf /'
STUB = """import json, os, sys
open(os.environ["MARKER"], "w").write(json.dumps({"argv": sys.argv[1:], "odd": os.environ.get("ODD"),
    "omp": os.environ.get("OMP_NUM_THREADS"), "acc": os.environ.get("SGLANG_SIMULATE_ACC_LEN"),
    "nvls": os.environ.get("NCCL_NVLS_ENABLE")}))
"""
TRIAL_PORT, TRIAL_NCCL_PORT = "31123", "31124"


def _sim_record(record_factory, env=None):
    rec = record_factory(3, tputs={1: 60, 8: 400}, flags={"mem-fraction-static": 0.83})
    argv = [
        sys.executable,
        "-m",
        "autotune.sim.server",
        "--sim-profile",
        "kimi-k2.5-int4-8x-rtxpro6000",
        "--sim-time-scale",
        "5.0",
        "--model-path",
        "/models/My Model",
        "--tp-size",
        "8",
        "--load-format",
        "dummy",
        "--trust-remote-code",
        "--mem-fraction-static",
        "0.83",
        "--host",
        "127.0.0.1",
        "--port",
        TRIAL_PORT,
        "--nccl-port",
        TRIAL_NCCL_PORT,
    ]
    env = env if env is not None else {"NCCL_ALGO": "Ring", "ODD": ODD_VALUE, "SGLANG_SIMULATE_ACC_LEN": "3.0"}
    return replace(with_argv(rec, argv), env=env)


@pytest.fixture
def stub_sglang(tmp_path: Path) -> Path:
    pkg = tmp_path / "stub" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(STUB)
    return tmp_path / "stub"


def _write(tmp_path: Path, text: str, name: str = "launch.sh") -> Path:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def _clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHON", "HOST", "PORT", "DRY_RUN", "NODE_RANK", "DIST_INIT_ADDR")
    }
    env.update(extra)
    return env


def _dry_run(script: Path, *args: str, **env: str) -> list[str]:
    out = subprocess.run(
        ["bash", str(script), "--dry-run", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env=_clean_env(**env),
        check=True,
    ).stdout
    return out.splitlines()


def test_simulated_study_exports_the_sglang_command(record_factory, tmp_path, levels):
    rec = _sim_record(record_factory)
    text = render_launch_script(rec, study_name="demo", load_levels=levels)
    assert "TUNED ON THE SIMULATOR" in text and "# Engine: SIMULATED" in text
    assert "-m sglang.launch_server" in text and "autotune.sim.server" not in text and "--sim-" not in text
    assert sys.executable not in text and TRIAL_PORT not in text and "--nccl-port" not in text
    assert "\nexport SGLANG_SIMULATE_ACC_LEN" not in text and "\n  --load-format" not in text
    assert "#   --load-format dummy: random weights" in text and "#   SGLANG_SIMULATE_ACC_LEN=3.0: simulated" in text
    lines = _dry_run(_write(tmp_path, text))
    assert lines[0] == "# dry run: nothing started"
    assert "export NCCL_ALGO=Ring" in lines and not any("SGLANG_SIMULATE_ACC_LEN" in ln for ln in lines)
    assert shlex.split(lines[-1]) == [
        "env",
        "-u",
        "OMP_NUM_THREADS",
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/My Model",
        "--tp-size",
        "8",
        "--trust-remote-code",
        "--mem-fraction-static",
        "0.83",
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
    ]
    odd_line = next(ln for ln in lines if ln.startswith("export ODD="))
    assert (
        subprocess.run(["bash", "-c", f'{odd_line}; printf %s "$ODD"'], capture_output=True, text=True).stdout
        == ODD_VALUE
    )


def test_host_port_python_and_extra_args(record_factory, tmp_path, levels):
    script = _write(tmp_path, render_launch_script(_sim_record(record_factory), study_name="d", load_levels=levels))
    argv = shlex.split(_dry_run(script, "--", "--api-key", "k 1", PORT="4242", HOST="10.0.0.5", PYTHON="py")[-1])
    assert argv[3:6] == ["py", "-m", "sglang.launch_server"]
    assert argv[-6:] == ["--host", "10.0.0.5", "--port", "4242", "--api-key", "k 1"]


def test_real_run_execs_sglang_with_the_measured_environment(record_factory, tmp_path, levels, stub_sglang):
    marker = tmp_path / "ran.json"
    rec = _sim_record(record_factory)
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    env = _clean_env(
        PYTHON=sys.executable, PYTHONPATH=str(stub_sglang), MARKER=str(marker), OMP_NUM_THREADS="7", PORT="5555"
    )
    subprocess.run(
        [str(script), "--", "--load-format", "dummy"], capture_output=True, text=True, timeout=60, env=env, check=True
    )
    seen = json.loads(marker.read_text())
    assert seen["odd"] == ODD_VALUE and seen["omp"] is None and seen["acc"] is None
    assert seen["argv"][-6:] == ["--host", "127.0.0.1", "--port", "5555", "--load-format", "dummy"]


def test_rehearsal_runs_the_simulator_as_measured(record_factory, tmp_path, levels):
    rec = _sim_record(record_factory)
    server = exported_server(rec)
    text = render_rehearsal_script(rec, study_name="demo", load_levels=levels, server=server)
    assert "REHEARSAL" in text and sys.executable not in text and TRIAL_PORT not in text
    lines = _dry_run(_write(tmp_path, text, "rehearse_sim.sh"))
    assert "export SGLANG_SIMULATE_ACC_LEN=3.0" in lines
    argv = shlex.split(lines[-1])
    assert argv[3:6] == ["python3", "-m", "autotune.sim.server"] and "--sim-profile" in argv
    assert argv[argv.index("--load-format") + 1] == "dummy" and "--nccl-port" not in argv


def test_site_variables_are_exported_only_when_the_trial_had_them(record_factory, tmp_path, levels):
    with_site = _sim_record(record_factory, env={"NCCL_NVLS_ENABLE": "0", "NVSHMEM_DISABLE_NVLS": "1"})
    text = render_launch_script(with_site, study_name="d", load_levels=levels)
    assert "export NCCL_NVLS_ENABLE=0\n" in text and "export NVSHMEM_DISABLE_NVLS=1\n" in text
    without = render_launch_script(_sim_record(record_factory), study_name="d", load_levels=levels)
    assert "NVLS" not in without and "MULTICAST" not in without
    # a study that searched NCCL_NVLS_ENABLE and kept 1 (a site without a multicast policy): a tuned variable, not
    # listed under multicast switched off
    tuned = render_launch_script(
        _sim_record(record_factory, env={"NCCL_NVLS_ENABLE": "1"}), study_name="d", load_levels=levels
    )
    assert "export NCCL_NVLS_ENABLE=1\n" in tuned and "switched off" not in tuned


def test_study_marked_settings_are_left_out_with_the_reason(record_factory, levels):
    rec = _sim_record(record_factory)
    server = exported_server(rec, {"trust-remote-code": "the kit needs it", "NCCL_ALGO": ""})
    text = render_launch_script(rec, study_name="d", load_levels=levels, server=server)
    assert "\n  --trust-remote-code" not in text and "\nexport NCCL_ALGO" not in text
    assert "#   --trust-remote-code: the kit needs it" in text
    assert "#   NCCL_ALGO=Ring: marked benchmark-only by the study" in text


def test_unknown_argument_is_refused(record_factory, tmp_path, levels):
    script = _write(tmp_path, render_launch_script(_sim_record(record_factory), study_name="d", load_levels=levels))
    proc = subprocess.run(["bash", str(script), "--dryrun"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "unknown argument" in proc.stderr


def test_script_without_env_works_under_set_u(record_factory, tmp_path, levels):
    rec = _sim_record(record_factory, env={"OMP_NUM_THREADS": "4"})
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    lines = _dry_run(script)
    assert "export OMP_NUM_THREADS=4" in lines and shlex.split(lines[-1])[:3] == ["env", "python3", "-m"]


def test_real_engine_banner_and_simulated_acceptance(record_factory, real_engine, levels):
    rec = replace(record_factory(0, tputs={1: 60}), engine=real_engine)
    text = render_launch_script(rec, study_name="demo", load_levels=levels)
    assert "# Engine: SGLang 0.5.17 on 2 x NVIDIA H200 on node gpu-7 (measured)" in text
    assert "SIMULATED" not in text and "TUNED ON THE SIMULATOR" not in text
    acc = replace(rec, env={"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    text = render_launch_script(acc, study_name="demo", load_levels=levels)
    assert "(measured)" not in text and "measured with SIMULATED speculative acceptance" in text


@pytest.mark.parametrize("env, argv, match", [({"BAD-NAME": "1"}, None, "not valid shell"), ({}, [], "no argv")])
def test_bad_records_raise(record_factory, levels, env, argv, match):
    rec = record_factory(0, tputs={1: 60})
    rec = replace(with_argv(rec, argv if argv is not None else rec.argv), env=env)
    with pytest.raises(ExportError, match=match):
        render_launch_script(rec, study_name="demo", load_levels=levels)


def test_the_as_measured_command_in_the_header_runs_with_odd_values(record_factory, tmp_path, levels, stub_sglang):
    """The header's 'To run exactly as measured' command quoted a whole ``'NAME=value'`` (bash then runs a command of
    that name) and put a value's newline on a line of its own, outside the comment."""
    marker = tmp_path / "ran.json"
    rec = _sim_record(record_factory)
    server = exported_server(rec, {"ODD": "", "mem-fraction-static": "site-specific"})
    text = render_launch_script(rec, study_name="demo", load_levels=levels, server=server)
    how = next(ln for ln in text.splitlines() if ln.startswith("# To run exactly as measured: "))
    command = how.split(": ", 1)[1].replace("bash launch.sh", f"bash {_write(tmp_path, text)}")
    env = _clean_env(PYTHON=sys.executable, PYTHONPATH=str(stub_sglang), MARKER=str(marker))
    subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env, check=True)
    seen = json.loads(marker.read_text())
    assert seen["odd"] == ODD_VALUE and seen["acc"] == "3.0"  # the benchmark-only variables, as measured
    assert seen["argv"][-2:] == ["--mem-fraction-static", "0.83"]

    two_lines = replace(rec, env={**rec.env, "ODD": "first\nsecond"})
    server = exported_server(two_lines, {"ODD": ""})
    text = render_launch_script(two_lines, study_name="demo", load_levels=levels, server=server)
    header = text.split("\nset -euo pipefail", 1)[0].splitlines()
    assert all(ln.startswith("#") for ln in header)


def _multinode_record(record_factory, real_engine):
    """A TP-16 trial over 2 nodes as the runner records it: rank 0's argv with its own node rank and address."""
    rec = replace(record_factory(4, tputs={1: 60, 8: 400}), engine=real_engine)
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/k2", "--tp-size", "16", "--nnodes", "2"]
    argv += ["--host", "127.0.0.1", "--port", TRIAL_PORT, "--nccl-port", TRIAL_NCCL_PORT]
    argv += ["--node-rank", "0", "--dist-init-addr", "10.9.8.7:45678"]
    return with_argv(rec, argv)


def test_multinode_script_takes_each_node_rank_and_rank_0_address(record_factory, real_engine, tmp_path, levels):
    rec = _multinode_record(record_factory, real_engine)
    text = render_launch_script(rec, study_name="mn", load_levels=levels)
    assert "10.9.8.7" not in text and "45678" not in text  # the trial's rank 0 address is not the user's
    assert "MULTI-NODE" in text and "NODE_RANK=1 DIST_INIT_ADDR=" in text
    script = _write(tmp_path, text)
    for rank in ("0", "1"):
        argv = shlex.split(_dry_run(script, NODE_RANK=rank, DIST_INIT_ADDR="10.0.0.1:50000")[-1])
        assert argv[argv.index("--nnodes") + 1] == "2" and argv.count("--node-rank") == 1
        assert argv[argv.index("--node-rank") + 1] == rank
        assert argv[argv.index("--dist-init-addr") + 1] == "10.0.0.1:50000"
    missing = subprocess.run(
        ["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=30, env=_clean_env()
    )
    assert missing.returncode != 0 and "NODE_RANK" in missing.stderr


def test_single_node_script_has_no_node_rank(record_factory, tmp_path, levels):
    text = render_launch_script(_sim_record(record_factory), study_name="d", load_levels=levels)
    assert "NODE_RANK" not in text and "--nnodes" not in text
