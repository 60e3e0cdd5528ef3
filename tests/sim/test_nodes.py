"""A simulated server over two nodes (SGLang's --nnodes/--node-rank/--dist-init-addr): rank 0 serves only once rank 1
joined, and stops when rank 1 is gone; rank 1 serves no HTTP."""

from __future__ import annotations

import subprocess
import time

import httpx

from tests.conftest import free_port
from tests.sim.test_server import FAST, SERVER, _env, _run_to_exit


def _health(url: str) -> int | None:
    try:
        return httpx.get(f"{url}/health", timeout=1.0).status_code
    except httpx.TransportError:
        return None


def _start(rank: int, port: int, dist: int) -> subprocess.Popen[str]:
    flags = ["--model-path", "m", "--host", "127.0.0.1", "--port", str(port), "--tp-size", "2"]
    flags += ["--sim-profile", "h200-llama-1b", "--nnodes", "2", "--node-rank", str(rank)]
    flags += ["--dist-init-addr", f"127.0.0.1:{dist}"]
    return subprocess.Popen(
        [*SERVER, *FAST, *flags], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_rank_zero_serves_after_rank_one_joined_and_stops_when_it_is_gone() -> None:
    port, dist = free_port(), free_port()
    url = f"http://127.0.0.1:{port}"
    head = _start(0, port, dist)
    other: subprocess.Popen[str] | None = None
    try:
        time.sleep(3.0)  # rank 0 alone: no node of the profile holds tp 2 (1 GPU each), so it waits for rank 1
        assert head.poll() is None and _health(url) != 200  # not ready (the HTTP site may answer 503)
        other = _start(1, free_port(), dist)
        deadline = time.monotonic() + 30
        while _health(url) != 200:
            assert head.poll() is None and time.monotonic() < deadline, "rank 0 did not become ready"
            time.sleep(0.1)
        info = httpx.get(f"{url}/server_info", timeout=5).json()
        assert info["nnodes"] == 2 and info["node_rank"] == 0 and info["tp_size"] == 2
        other.kill()  # node rank 1 lost
        assert head.wait(timeout=30) == 1
        log = head.stdout.read() if head.stdout else ""
        assert "node rank 1 joined (2/2 nodes)" in log and "node rank 1 is gone" in log, log
    finally:
        for p in (head, other):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_rank_one_stops_on_sigterm_and_bad_multi_node_flags_fail_like_sglang() -> None:
    port, dist = free_port(), free_port()
    head, other = _start(0, port, dist), _start(1, free_port(), dist)
    try:
        deadline = time.monotonic() + 30
        while _health(f"http://127.0.0.1:{port}") != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        other.terminate()
        assert other.wait(timeout=10) == 0
        assert "no HTTP server on this node" in (other.stdout.read() if other.stdout else "")
    finally:
        for p in (head, other):
            if p.poll() is None:
                p.kill()
                p.wait()
    missing = _run_to_exit("--tp-size", "2", "--nnodes", "2")
    assert missing.returncode == 1 and "--dist-init-addr is required" in missing.stdout
    uneven = _run_to_exit("--tp-size", "3", "--nnodes", "2", "--dist-init-addr", "127.0.0.1:1")
    assert uneven.returncode == 1 and "not divisible by --nnodes 2" in uneven.stdout
