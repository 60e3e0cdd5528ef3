"""tools/where_to_change.py: the counting rule on small trees, and docs/architecture.md's "now" column against the
working tree."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tools.where_to_change import CHANGES, counts, touched, tree_sources

ROOT = Path(__file__).resolve().parents[2]


def test_code_counts_and_prose_does_not() -> None:
    sources = {
        "autotune/study/runner.py": 'def run(engine):\n    return engine == "sglang"\n',
        "autotune/study/driver.py": '"""Runs on "sglang" and sim; concurrency levels; synthetic workloads."""\n'
        "# a comment naming concurrency, launch.sh and 'jsonl'\n",
        "autotune/engines/sglang.py": 'NAME = "sglang"\n',  # the engine's own code
        "autotune/sim/server.py": 'ENGINE = "sim"\n',
        "autotune/policy/fit.py": "from autotune.engines.sglang_facts import MEM\n",
        "autotune/bench/client.py": "def run(plan):\n    return [lvl.concurrency for lvl in plan.levels]\n",
        "autotune/bench/workload.py": 'def load(kind="synthetic"):\n    return kind\n',
        "autotune/export/writer.py": 'FILES = ["launch.sh", "best.json"]\n',
        "autotune/export/launch_script.py": 'NAME = "launch.sh"\n',  # the document's own writer
    }
    found = touched(sources)
    assert found == {
        "new engine": ["autotune/policy/fit.py", "autotune/study/runner.py"],
        "request-rate load": ["autotune/bench/client.py"],
        "ShareGPT workload": ["autotune/bench/workload.py"],
        "Kubernetes export": ["autotune/export/writer.py"],
    }
    assert counts(sources) == {"new engine": 3, "request-rate load": 1, "ShareGPT workload": 2, "Kubernetes export": 2}


def test_a_relative_import_of_an_engine_counts() -> None:
    found = touched({"autotune/engines/base.py": "from .sglang_rules import violations\n"})
    assert found["new engine"] == ["autotune/engines/base.py"]


def documented_now(path: Path = ROOT / "docs" / "architecture.md") -> dict[str, int]:
    """The "now" column of the "Where to change what" table."""
    text = path.read_text()
    section = text[text.index("## Where to change what") :]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines() if line.startswith("|")
    ]
    header = rows[0]
    now = header.index("now")
    return {row[0]: int(re.sub(r"\D", "", row[now])) for row in rows[2:] if row[0] in {c.name for c in CHANGES}}


def test_the_documented_counts_are_the_working_trees() -> None:
    assert documented_now() == counts(tree_sources(None))


def test_the_script_prints_a_table_and_names_a_bad_revision() -> None:
    run = subprocess.run([sys.executable, "tools/where_to_change.py"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "| new engine" in run.stdout
    bad = subprocess.run(
        [sys.executable, "tools/where_to_change.py", "--rev", "no-such-rev"], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode != 0 and "no-such-rev" in bad.stderr and "Fix:" in bad.stderr
