"""The typed launch a record keeps (``autotune.trial.launched``): read from an argv once, redacted like the argv,
round-tripped through JSON, and read from records written before it was kept (committed evidence files)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autotune.core.secrets import REDACTED
from autotune.trial.launched import Launched, read_launched
from autotune.trial.records import SCHEMA_VERSION, TrialRecord
from autotune.trial.store import StudyStore

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "results" / "evidence"
ARGV = [
    "/venv/bin/python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/m",
    "--tp-size",
    "4",
    "--dp-size=2",
    "--disable-custom-all-reduce",
    "--api-key",
    "sk-not-a-real-key",
    "--port",
    "30001",
]


def test_an_argv_is_read_into_module_options_and_parallelism() -> None:
    launch = Launched.from_argv("sglang", ARGV)
    assert launch.module == "sglang.launch_server" and launch.engine == "sglang"
    assert launch.options[:4] == (
        ("model-path", "/models/m"),
        ("tp-size", "4"),
        ("dp-size", "2"),
        ("disable-custom-all-reduce", None),
    )
    assert (launch.tp_size, launch.dp_size, launch.gpus) == (4, 2, 8)
    assert launch.option("port") == "30001" and launch.option("disable-custom-all-reduce") is None
    assert launch.has("disable-custom-all-reduce") and not launch.has("nccl-port")
    assert Launched.from_json(json.loads(json.dumps(launch.to_json()))) == launch


@pytest.mark.parametrize(
    ("argv", "why"),
    [
        ([], "no argv"),
        (["bash", "launch.sh"], "does not run a Python module"),
        (["python", "-m", "m", "stray"], "unexpected argument 'stray'"),
        (["python", "-m", "m", "--tp-size", "two"], "cannot read --tp-size"),
    ],
)
def test_an_argv_that_is_not_a_module_launch_has_no_launch_and_says_why(argv: list[str], why: str) -> None:
    launch, reason = read_launched("sglang", argv)
    assert launch is None and why in reason


def test_a_secret_option_is_redacted_as_in_the_argv() -> None:
    safe = Launched.from_argv("sglang", ARGV).redacted()
    assert safe.option("api-key") == REDACTED and safe.option("model-path") == "/models/m"
    assert Launched.from_argv("sglang", ARGV).redacted(["model-path"]).option("model-path") == REDACTED


@pytest.mark.parametrize(
    ("study", "schema", "module"),
    [("sim-kimi-speculative", 0, "autotune.sim.server"), ("h200-tp1-r5", 1, "sglang.launch_server")],
)
def test_records_written_before_the_launch_was_kept_read_it_from_their_argv(
    study: str, schema: int, module: str, tmp_path: Path
) -> None:
    records = StudyStore(EVIDENCE / study).load()
    assert records and all(r.schema_version == schema < SCHEMA_VERSION for r in records)
    lines = [json.loads(line) for line in (EVIDENCE / study / "trials.jsonl").read_text().splitlines() if line]
    assert all("launch" not in line for line in lines)  # the old shape
    launched = [r for r in records if r.argv]
    assert launched
    for rec in launched:
        assert rec.launch is not None and rec.launch.module == module
        assert rec.launch.engine == (rec.engine.engine if rec.engine else None)
        flat = [t for name, value in rec.launch.options for t in (f"--{name}", value) if t is not None]
        assert rec.argv[rec.argv.index("-m") + 2 :] == flat  # every option, in order
        again = TrialRecord.from_json(json.loads(json.dumps(rec.to_json())))
        assert again == rec and again.to_json()["launch"]["module"] == module
    assert all(r.launch is None for r in records if not r.argv)  # never launched (invalid)
    # and the old records export: best/launch.sh runs the best trial's options
    from autotune.report.render import rerender

    copy = tmp_path / study
    shutil.copytree(EVIDENCE / study, copy, ignore=shutil.ignore_patterns("best", "logs", "trials", "*.log"))
    done = rerender(copy)
    assert done.export.best is not None and done.export.launch_script is not None
    script = done.export.launch_script.read_text()
    best = done.export.best.launch
    assert best is not None and f"--model-path {best.option('model-path')}" in script
