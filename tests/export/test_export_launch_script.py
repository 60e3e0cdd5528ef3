"""launch.sh: exact env and argv, dry-run prints without running, a real run execs the argv with the env."""

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

from autotune.export.errors import ExportError
from autotune.export.launch_script import render_launch_script

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")

# The "server": writes its argv and one env var to a file named by MARKER, so a test can see whether it ran.
SERVER_CODE = "import json,os,sys; open(os.environ['MARKER'],'w').write(json.dumps([sys.argv[1:], os.environ['ODD']]))"
ODD_VALUE = 'it\'s $HOME "quoted" `not run` ; rm -rf /'


def _record(record_factory, marker: Path):
    rec = record_factory(3, tputs={1: 60, 8: 400}, flags={"mem-fraction-static": 0.85})
    argv = [
        sys.executable,
        "-c",
        SERVER_CODE,
        "--model-path",
        "/models/My Model",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
    ]
    env = {"NCCL_ALGO": "Ring", "ODD": ODD_VALUE, "MARKER": str(marker)}
    return replace(rec, argv=argv, env=env)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "launch.sh"
    path.write_text(text)
    path.chmod(0o755)
    return path


def test_script_content(record_factory, tmp_path, levels):
    rec = _record(record_factory, tmp_path / "ran.json")
    text = render_launch_script(rec, study_name="demo", load_levels=levels)
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert f"export ODD={shlex.quote(ODD_VALUE)}\n" in text
    assert "export NCCL_ALGO=Ring\n" in text
    assert "  --model-path '/models/My Model'\n" in text
    assert "# Engine: SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement" in text
    assert "study demo, trial 3 (id t0003)" in text
    assert "output_tok_per_s@max = 400" in text and "Concurrency 8: 400.0 output tok/s" in text
    assert "binds to 127.0.0.1 (loopback): only this machine can reach it" in text and "--host" in text
    assert "--dry-run" in text and "DRY_RUN=1" in text


@pytest.mark.parametrize("how", ["flag", "env"])
def test_dry_run_prints_command_and_env_without_running(record_factory, tmp_path, levels, how):
    marker = tmp_path / "ran.json"
    rec = _record(record_factory, marker)
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    args = ["bash", str(script)] + (["--dry-run"] if how == "flag" else [])
    env = {**os.environ, "DRY_RUN": "1"} if how == "env" else None
    out = subprocess.run(args, capture_output=True, text=True, timeout=30, env=env, check=True).stdout
    assert not marker.exists()
    lines = out.splitlines()
    assert lines[0] == "# dry run: nothing started"
    assert "export NCCL_ALGO=Ring" in lines
    # The printed command and env are valid shell: splitting them gives back the exact argv and values.
    assert shlex.split(lines[-1]) == rec.argv
    odd_line = next(ln for ln in lines if ln.startswith("export ODD="))
    assert (
        subprocess.run(["bash", "-c", f'{odd_line}; printf %s "$ODD"'], capture_output=True, text=True).stdout
        == ODD_VALUE
    )


def test_real_run_execs_exact_argv_with_env(record_factory, tmp_path, levels):
    marker = tmp_path / "ran.json"
    rec = _record(record_factory, marker)
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    subprocess.run([str(script)], capture_output=True, text=True, timeout=30, check=True)
    argv_seen, odd_seen = json.loads(marker.read_text())
    assert argv_seen == rec.argv[3:] and odd_seen == ODD_VALUE


def test_unknown_argument_is_refused(record_factory, tmp_path, levels):
    rec = _record(record_factory, tmp_path / "ran.json")
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    proc = subprocess.run(["bash", str(script), "--dryrun"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "unknown argument" in proc.stderr
    assert not (tmp_path / "ran.json").exists()


def test_script_without_env_works_under_set_u(record_factory, tmp_path, levels):
    rec = replace(_record(record_factory, tmp_path / "m"), env={})
    script = _write(tmp_path, render_launch_script(rec, study_name="demo", load_levels=levels))
    out = subprocess.run(["bash", str(script), "--dry-run"], capture_output=True, text=True, timeout=30, check=True)
    assert shlex.split(out.stdout.splitlines()[-1]) == rec.argv


def test_real_engine_banner(record_factory, real_engine, levels):
    rec = replace(record_factory(0, tputs={1: 60}), engine=real_engine)
    text = render_launch_script(rec, study_name="demo", load_levels=levels)
    assert "# Engine: SGLang 0.5.17 on 2 x NVIDIA H200 on node gpu-7 (measured)" in text
    assert "SIMULATED" not in text


@pytest.mark.parametrize("env, argv, match", [({"BAD-NAME": "1"}, None, "not valid shell"), ({}, [], "no argv")])
def test_bad_records_raise(record_factory, levels, env, argv, match):
    rec = record_factory(0, tputs={1: 60})
    rec = replace(rec, env=env, argv=argv if argv is not None else rec.argv)
    with pytest.raises(ExportError, match=match):
        render_launch_script(rec, study_name="demo", load_levels=levels)
