"""export_study end to end on hand-built records: files, their agreement, the report's sections, no-feasible case."""

from __future__ import annotations

import json
import re
import shlex
import stat
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from autotune.export import ExportError, export_study
from autotune.export.ray_llm import ray_llm_available
from autotune.space import Objective
from autotune.trial.records import FailureKind, TrialOutcome
from tests.export.conftest import LEVELS, OBJECTIVES, study_records

SIM_BANNER = "SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One export of the hand-built study for the tests that only read it (each export renders the report and its
    charts: seconds on a loaded machine)."""
    tmp_path = tmp_path_factory.mktemp("exported")
    # each level measured in windows (+-2%): the report's comparisons can tell the single launches apart
    records = study_records(window_pct=2.0)
    result = export_study(tmp_path, study_name="demo", objectives=list(OBJECTIVES), records=records, load_levels=LEVELS)
    return result, tmp_path / "best"


def test_writes_every_artifact(exported):
    result, best_dir = exported
    names = sorted(p.name for p in result.paths)
    expected = [
        "best.json",
        "launch.sh",
        "pareto.json",
        "pareto.svg",
        "rayservice.yaml",
        "report.md",
        "serve_config.yaml",
    ]
    expected += ["ray_serve_llm.yaml"] if ray_llm_available() else []
    assert names == sorted([*expected, "throughput_vs_concurrency.svg"])
    assert all(p.parent == best_dir and p.is_file() for p in result.paths)
    assert result.launch_script is not None and result.launch_script.stat().st_mode & stat.S_IXUSR
    assert not list(best_dir.glob(".*.tmp"))


def test_every_artifact_states_the_engine(exported):
    result, _ = exported
    for path in result.paths:
        assert SIM_BANNER in path.read_text(), path.name


def test_best_json_launch_sh_and_serve_config_agree(exported, records):
    result, best_dir = exported
    assert result.best is not None and result.best.number == 0
    best = json.loads((best_dir / "best.json").read_text())["best"]
    assert best["number"] == 0 and best["trial_id"] == "t0000"
    assert best["argv"] == records[0].argv and best["env"] == records[0].env
    assert best["params"] == {"mem-fraction-static": 0.85}
    assert [lv["concurrency"] for lv in best["levels"]] == [1, 8, 32, 128]
    assert best["engine"]["simulated"] is True and best["primary_objective"]["value"] == 2370
    production = json.loads((best_dir / "best.json").read_text())["export"]["production"]
    dry = subprocess.run(["bash", str(best_dir / "launch.sh"), "--dry-run"], capture_output=True, text=True, timeout=30)
    # launch.sh, best.json's export section and serve_config.yaml name the same server: the trial's argv without the
    # interpreter, host and port (which the scripts and the replica set).
    rest = best["argv"][3:]
    trial_args = [
        a for i, a in enumerate(rest) if a not in ("--host", "--port") and rest[i - 1] not in ("--host", "--port")
    ]
    assert production["args"] == trial_args and production["env"] == best["env"]
    assert shlex.split(dry.stdout.splitlines()[-1])[3:] == [
        "python3",
        "-m",
        "sglang.launch_server",
        *trial_args,
        "--host",
        "127.0.0.1",
        "--port",
        "30000",
    ]
    app = ServeDeploySchema.model_validate(yaml.safe_load((best_dir / "serve_config.yaml").read_text())).applications[0]
    assert app.args["argv"] == ["-m", "sglang.launch_server", *trial_args, "--host", "127.0.0.1", "--port", "0"]
    assert app.args["env"] == best["env"] and app.args["unset_env"] == production["unset_env"] == ["OMP_NUM_THREADS"]


def test_pareto_json(exported):
    _, best_dir = exported
    doc = json.loads((best_dir / "pareto.json").read_text())
    # the study's two objectives: output tok/s at 128 (maximize) and TTFT p99 at 128, the same for every trial
    assert [(a["key"], a["level"], a["direction"]) for a in doc["axes"]] == [
        ("output_tok_per_s@max", 128, "maximize"),
        ("ttft_ms.p99@max", 128, "minimize"),
    ]
    assert [p["number"] for p in doc["front"]] == [0] and doc["study_objectives"] is True
    assert sorted(p["number"] for p in doc["dominated"]) == [2, 3, 4]
    assert doc["front"][0]["values"] == {"output_tok_per_s@max": 2370, "ttft_ms.p99@max": 100.0}


def test_report_sections(exported, drafters):
    _, best_dir = exported
    report = (best_dir / "report.md").read_text()
    assert f"> **Engine: {SIM_BANNER}" in report
    assert "**Best: trial 0**" in report
    assert "## Per-traffic-regime recommendation" in report
    assert "| 1 | #4: " in report and "| 128 | #0: " in report
    assert "Speculation wins up to concurrency 8; from concurrency 32" in report
    assert "broken drafter / wrong algorithm for this drafter (accept length ~1.0): no draft token accepted" in report
    assert drafters["custom"] in report
    assert "Trial 1: speculative without --max-running-requests" in report
    assert "Trial 4: speculative" not in report
    assert "### oom_at_launch (2)" in report and "### invalid_config (1)" in report
    assert "(log: `RuntimeError: Not enough memory. Please try to increase --mem-fraction-static`)" in report
    assert "| **0 (best)** | complete | yes |" in report
    # a multi-objective study: its Pareto set is on its objectives, and the trials table shows each of them
    assert "Feasible trials, the study's objectives: output_tok_per_s at concurrency 128 (maximize), " in report
    assert "| TPOT median @128 (ms) | output_tok_per_s@max | ttft_ms.p99@max |" in report
    assert "failed:oom_at_launch" in report and "![Pareto set](pareto.svg)" in report


def test_svgs_are_well_formed(exported):
    _, best_dir = exported
    for name in ("pareto.svg", "throughput_vs_concurrency.svg"):
        root = ET.fromstring((best_dir / name).read_text())
        assert root.tag.endswith("svg")
        texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
        assert "SIMULATED" in texts
    throughput = ET.fromstring((best_dir / "throughput_vs_concurrency.svg").read_text())
    lines = [e.get("id") for e in throughput.iter() if re.fullmatch(r"trial-\d+", e.get("id") or "")]
    assert len(lines) == 5  # one line per completed trial
    labels = [t.text for t in throughput.iter() if t.tag.endswith("text")]
    assert "speculation stops winning at 32" in labels


def test_no_feasible_trial(tmp_path, records, objectives, levels):
    first = export_study(tmp_path, study_name="demo", objectives=objectives, records=records, load_levels=levels)
    assert first.launch_script is not None and first.launch_script.exists()
    infeasible = [replace(r, feasible=False, constraints={"ttft_ms.p99@max": 9.0}) for r in records]
    result = export_study(tmp_path, study_name="demo", objectives=objectives, records=infeasible, load_levels=levels)
    assert result.best is None and result.launch_script is None and result.serve_config is None
    best_dir = tmp_path / "best"
    assert not (best_dir / "launch.sh").exists() and not (best_dir / "serve_config.yaml").exists()  # stale removed
    doc = json.loads((best_dir / "best.json").read_text())
    assert doc["best"] is None and "no feasible trial among 8" in doc["reason"]
    report = (best_dir / "report.md").read_text()
    assert "**No feasible trial.**" in report and SIM_BANNER in report
    files = report[report.index("## Files") :]  # names only what was written: the scripts were removed above
    assert "No `launch.sh` or `serve_config.yaml`" in files and "`launch.sh` (the SGLang command" not in files
    assert json.loads((best_dir / "pareto.json").read_text())["front"] == []
    ET.fromstring((best_dir / "pareto.svg").read_text())


def test_only_failures_and_no_engine(tmp_path, record_factory, objectives, levels):
    recs = [
        record_factory(0, outcome=TrialOutcome.FAILED, failure=FailureKind.HEALTH_TIMEOUT, engine=None),
        record_factory(1, outcome=TrialOutcome.INVALID, engine=None),
    ]
    result = export_study(tmp_path, study_name="x", objectives=objectives, records=recs, load_levels=levels)
    report = result.report.read_text()
    assert "Engine: unknown" in report and "### health_timeout (1)" in report and "### invalid (1)" in report
    assert "No speculative trial in this study" in report


SIDEWAYS = Objective("output_tok_per_s", "max", "sideways")  # type: ignore[arg-type]  # a direction the export refuses


def test_bad_input_writes_nothing(tmp_path, records, levels):
    with pytest.raises(ExportError):
        export_study(tmp_path, study_name="demo", objectives=[SIDEWAYS], records=records, load_levels=levels)
    assert not (tmp_path / "best").exists()


def test_real_engine_study(tmp_path, records, objectives, levels, real_engine):
    real = [replace(r, engine=real_engine) if r.engine else r for r in records]
    result = export_study(tmp_path, study_name="demo", objectives=objectives, records=real, load_levels=levels)
    for path in result.paths:
        text = path.read_text()
        assert "SGLang 0.5.17 on 2 x NVIDIA H200" in text and "SIMULATED" not in text, path.name


def test_mixed_engines_are_called_out(tmp_path, records, objectives, levels, real_engine):
    mixed = [replace(records[0], engine=real_engine), *records[1:]]
    result = export_study(tmp_path, study_name="demo", objectives=objectives, records=mixed, load_levels=levels)
    assert "MIXED, do not compare" in result.report.read_text()
