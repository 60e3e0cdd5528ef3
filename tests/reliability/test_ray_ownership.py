"""Issue 28 case 4: a study owns its Ray. After a killed driver, the next run stops the processes its dead cluster left
(found by that cluster's session, not by name) so the ports they hold are free again, and says what it did; nothing
stops a Ray process the study did not start (the GPU kit's ``ray stop --force`` included).

Before: orphaned ``ray::DashboardAgent`` / ``RuntimeEnvAgent`` processes kept their ports for a minute or more and the
rerun died with a raw Ray start-up traceback. The orphans here are real processes holding real ports, named as Ray names
its agents, with their logs open in a session folder. The ports are picked free ones, not Ray's defaults (52365, 8265):
the test suite runs Ray clusters beside this test, and one of them may take a default port the moment an orphan lets
it go (what found the dead cluster is its session, never a port, so the port's number changes nothing here)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotune.study import cluster
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]

# A process that looks like a Ray agent of a session: its title is Ray's, it holds ports, its log is in the session.
AGENT = """
import socket, sys, time
log = open(sys.argv[1], "a")
socks = []
for port in map(int, sys.argv[2:]):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", port)); s.listen()
    socks.append(s)
print("up", flush=True)
time.sleep(300)
"""


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _agent(session: Path, title: str, *ports: int) -> subprocess.Popen[str]:
    (session / "logs").mkdir(parents=True, exist_ok=True)
    log = session / "logs" / f"{title.split('::')[-1].lower()}.log"
    proc = subprocess.Popen(
        [
            "bash",
            "-c",
            f'exec -a "{title}" "$0" -c "$1" "$2" "${{@:3}}"',
            sys.executable,
            AGENT,
            str(log),
            *map(str, ports),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "up"
    return proc


def _dead_driver_left(study: Path, session: Path) -> None:
    """What a driver writes when it starts the study's local Ray, as a killed one leaves it."""
    study.mkdir(parents=True, exist_ok=True)
    (study / cluster.SESSION_FILE).write_text(json.dumps({"session_dir": str(session), "driver_pid": 999999999}))


def test_the_next_run_stops_its_dead_clusters_agents_and_frees_their_ports(tmp_path: Path) -> None:
    ports = [free_port(), free_port()]
    ours = tmp_path / "ray" / "session_2026-12-03_10-00-00_000001_4242"
    theirs = tmp_path / "ray" / "session_2026-12-03_10-00-00_000002_5353"  # another user's cluster, same titles
    metrics = free_port()
    study = tmp_path / "results" / "smoke"
    _dead_driver_left(study, ours)
    said: list[str] = []
    orphans: list[subprocess.Popen[str]] = []
    other: list[subprocess.Popen[str]] = []
    try:
        orphans += [
            _agent(ours, "ray::DashboardAgent", ports[0], metrics),
            _agent(ours, "ray::RuntimeEnvAgent", ports[1]),
        ]
        other.append(_agent(theirs, "ray::DashboardAgent", free_port()))
        assert not any(_port_free(p) for p in (*ports, metrics))
        stopped = cluster.stop_orphans(study, said.append)
        assert sorted(stopped) == sorted(p.pid for p in orphans)
        for p in orphans:
            assert p.wait(timeout=15) is not None
        assert all(_port_free(p) for p in (*ports, metrics)), "the dead cluster's ports are free again"
        assert other[0].poll() is None, "another cluster's agent with the same name is left alone"
        text = " ".join(said)
        assert "2 process(es)" in text and ours.name in text and str(orphans[0].pid) in text, said
        assert "DashboardAgent" in text and "RuntimeEnvAgent" in text, said
        assert cluster.stop_orphans(study, said.append) == []  # nothing left: silent
    finally:
        for p in (*orphans, *other):
            p.kill()
            p.wait()


def test_nothing_in_the_repository_stops_ray_processes_it_did_not_start() -> None:
    """``ray stop`` stops every Ray on the machine, other users' clusters included; so do name-based kills."""
    offenders = []
    for path in [*ROOT.glob("tools/**/*.sh"), *ROOT.glob("tools/**/*.py"), *ROOT.glob("autotune/**/*.py")]:
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            code = line.split("#", 1)[0]
            if "ray stop" in code or "pkill" in code or "killall" in code:
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_a_driver_that_started_ray_leaves_its_session_for_the_next_run(tmp_path: Path) -> None:
    """The session file is written as the cluster starts (a killed driver cannot write it later)."""
    session = tmp_path / "ray" / "session_x"
    cluster.record_session(tmp_path, str(session))
    data = json.loads((tmp_path / cluster.SESSION_FILE).read_text())
    assert data["session_dir"] == str(session) and data["driver_pid"] == os.getpid()
    assert cluster.stop_orphans(tmp_path, lambda s: None) == []  # our own live cluster's processes are not orphans


def test_stop_orphans_without_a_session_file_does_nothing(tmp_path: Path) -> None:
    t0 = time.monotonic()
    assert cluster.stop_orphans(tmp_path, lambda s: pytest.fail(s)) == []
    assert time.monotonic() - t0 < 5
