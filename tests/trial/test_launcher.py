"""The launcher against real processes: a tiny HTTP server script, a crashing one, a hung one."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from autotune.core.errors import LaunchError
from autotune.core.trial import LaunchSpec
from autotune.trial.launcher import ServerProcess, build_env, launched
from autotune.trial.records import FailureKind

SERVER = r"""
import http.server, os, sys, time, subprocess
port = int(sys.argv[1]); delay = float(sys.argv[2])
# a child in the same session, like SGLang's scheduler processes
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("Load weight end. elapsed=0.10 s", flush=True)
time.sleep(delay)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(os.environ.get("PROBE", "").encode())
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec_for(argv: list[str], port: int, timeout: float = 20.0, **kw: object) -> LaunchSpec:
    return LaunchSpec(
        engine="sim",
        argv=tuple(argv),
        env={"PROBE": "x"},
        host="127.0.0.1",
        port=port,
        gpus=1,
        ready_timeout_s=timeout,
        **kw,
    )  # type: ignore[arg-type]


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def test_ready_then_whole_group_torn_down(tmp_path: Path) -> None:
    port = free_port()
    spec = spec_for([sys.executable, "-c", SERVER, str(port), "0.3"], port)
    with launched(spec, tmp_path / "s.log") as server:
        assert server.ready_at is not None
        pgid = server.proc.pid  # type: ignore[union-attr]
        assert group_alive(pgid)
    assert not group_alive(pgid), "the child process in the server's session must be gone too"
    assert "Load weight end" in (tmp_path / "s.log").read_text()


def test_crash_before_ready_reports_kind_and_tail_at_once(tmp_path: Path) -> None:
    script = "import sys; print('RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'); sys.exit(1)"
    spec = spec_for([sys.executable, "-c", script], free_port(), timeout=60)
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as exc:
        with launched(spec, tmp_path / "s.log"):
            pass
    assert exc.value.kind is FailureKind.OOM_AT_LAUNCH
    assert "Not enough memory" in exc.value.log_tail
    assert time.monotonic() - t0 < 30, "a crash must be noticed by polling the process, not by the timeout"


def test_hung_server_times_out_and_is_killed(tmp_path: Path) -> None:
    spec = spec_for([sys.executable, "-c", "import time; time.sleep(600)"], free_port(), timeout=1.5)
    server = ServerProcess(spec, tmp_path / "s.log")
    server.start()
    with pytest.raises(LaunchError) as exc:
        server.wait_ready()
    assert exc.value.kind is FailureKind.HEALTH_TIMEOUT
    assert "ready_timeout_s" in str(exc.value)
    assert not server.alive()


def test_env_overlay_and_unset() -> None:
    spec = spec_for(["x"], 1, unset_env=("OMP_NUM_THREADS",))
    env = build_env(spec, {"OMP_NUM_THREADS": "1", "KEEP": "y"})
    assert env["PROBE"] == "x" and env["KEEP"] == "y" and "OMP_NUM_THREADS" not in env
