"""tests/conftest.py's lanes: an ``xdist_group`` holds on one worker whatever ``--dist`` says, and the fast lane
(``-m "not slow"``) leaves out the research harness unless the expression names it. Each case runs pytest on a small
copy that uses the real conftest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import os
from pathlib import Path

import pytest

OUT = Path(os.environ["PROBE_OUT"])


def _record(name):
    with OUT.open("a") as f:
        f.write(f"{name} {os.environ.get('PYTEST_XDIST_WORKER', 'main')}\\n")


@pytest.mark.xdist_group("study")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    _record(f"grouped-{i}")


@pytest.mark.parametrize("i", range(8))
def test_free(i):
    _record(f"free-{i}")


@pytest.mark.research
def test_harness():
    _record("research")
"""


def run_probe(tmp_path: Path, *args: str) -> dict[str, str]:
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import *  # noqa: F403\n"
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tmp_path / "test_probe.py").write_text(PROBE)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    research: r\n    slow: s\n")
    out = tmp_path / "ran.txt"
    env = {**os.environ, "PROBE_OUT": str(out), "PYTHONPATH": str(ROOT)}
    # the plugins no test here uses (hypothesis', pytest-benchmark's, anyio's, where installed) stay out: they took
    # about two thirds of each probe run's start-up (measured 19-20 s with them, 6-7 s without, -n 2, loaded machine)
    quiet = ["-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:anyio"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *quiet, *args, str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return dict(line.split() for line in out.read_text().splitlines())


@pytest.mark.parametrize("dist", [[], ["--dist", "loadgroup"]])
def test_an_xdist_group_runs_on_one_worker(tmp_path: Path, dist: list[str]) -> None:
    pytest.importorskip("xdist")
    ran = run_probe(tmp_path, "-n", "2", *dist)
    assert {worker for name, worker in ran.items() if name.startswith("grouped")} in ({"gw0"}, {"gw1"})
    assert len(ran) == 13


@pytest.mark.parametrize(
    ("args", "research_runs"),
    [
        (["-m", "not slow"], False),
        (["-m", "not slow or research"], True),
    ],
)
def test_the_fast_lane_leaves_the_research_harness_out(tmp_path: Path, args: list[str], research_runs: bool) -> None:
    assert ("research" in run_probe(tmp_path, *args)) is research_runs
