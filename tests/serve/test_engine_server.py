"""The Serve deployment's class, constructed directly (no Ray): deferred teardown and the GPU wait before a launch."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from autotune.core.errors import LaunchError
from autotune.core.failures import FailureKind
from autotune.serve import app as app_mod
from autotune.serve import launch_prep
from autotune.trial.registry import group_alive
from autotune.trial.replica import Failure, Ready, ServerReport, Teardown

SERVER = r"""
import http.server, sys, subprocess
port = int(sys.argv[1])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a child in the same session
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""

EngineServer = app_mod.EngineServer.func_or_class  # the plain class behind @serve.deployment


def make_server(tmp_path: Path) -> object:
    args = app_mod.EngineArgs(
        name="t",
        engine="sim",
        argv=[sys.executable, "-c", SERVER, "--port", "0"],
        log_dir=str(tmp_path),
        check_flags=False,
        ready_timeout_s=20,
    )
    # the script reads its port as argv[1]: put the picked port there
    server = EngineServer(args.model_dump())
    return server


def test_deferred_stop_returns_at_once_and_the_group_dies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_mod, "with_port", lambda argv, flag, port: [argv[0], argv[1], argv[2], str(port)])
    server = make_server(tmp_path)
    assert isinstance(server.wait_ready(), Ready)
    pgid = server.server.proc.pid
    t0 = time.monotonic()
    out = server.stop_server(defer=True)
    assert isinstance(out, Teardown) and out.deferred is True and out.error == ""
    assert time.monotonic() - t0 < 0.5, "a deferred stop only sends SIGKILL"
    assert server.server is None and server.stop_server(defer=True).teardown_s == 0.0
    deadline = time.monotonic() + 10
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(pgid), "the SIGKILL reaches the server's child too, and the reaper collects the group"


def test_gpu_wait_before_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert launch_prep.wait_gpus_before_launch([]) is None  # no GPU: nothing to wait for
    readings = iter([{"0": 60_000}, {"0": 60_000}, {"0": 3}])
    monkeypatch.setattr("autotune.core.gpus.memory_used_mib", lambda ids: next(readings))
    monkeypatch.setattr("autotune.trial.launcher.time.sleep", lambda s: None)
    waited = launch_prep.wait_gpus_before_launch(["0"])
    assert waited is not None and waited >= 0


def test_gpu_still_busy_is_a_deploy_error_that_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("autotune.core.gpus.memory_used_mib", lambda ids: {"3": 70_000})
    monkeypatch.setattr(launch_prep, "GPU_WAIT_TIMEOUT_S", 0.0)
    with pytest.raises(LaunchError) as info:
        launch_prep.wait_gpus_before_launch(["3"])
    assert info.value.kind is FailureKind.DEPLOY_ERROR
    msg = str(info.value)
    assert "GPU(s) 3 still in use" in msg and "nvidia-smi" in msg and "rerun the same command" in msg


def slot_config(tmp_path: Path, name: str) -> dict[str, object]:
    return app_mod.EngineArgs(
        name=name,
        engine="sim",
        argv=[sys.executable, "-c", SERVER, "--port", "0"],
        log_dir=str(tmp_path),
        check_flags=False,
        ready_timeout_s=20,
    ).model_dump()


def test_a_gpu_slot_replica_runs_one_trial_after_another(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app_mod, "with_port", lambda argv, flag, port: [argv[0], argv[1], argv[2], str(port)])
    slot = EngineServer()  # a slot app's replica: no engine until Serve hands it a trial's user_config
    assert slot.server is None and slot.launches == 0 and slot.info().argv == ()
    slot.reconfigure(slot_config(tmp_path, "trial-000-a"))
    assert isinstance(slot.wait_ready("trial-000-a"), Ready)
    first = slot.server.proc.pid
    assert (tmp_path / "trial-000-a.log").exists()

    # the next trial's config: the running engine is killed, the new one launched on the same replica
    slot.reconfigure(slot_config(tmp_path, "trial-001-b"))
    assert slot.launches == 2 and slot.ready_s is None
    assert isinstance(slot.wait_ready("trial-001-b"), Ready)
    assert slot.server.proc.pid != first
    deadline = time.monotonic() + 10
    while group_alive(first) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not group_alive(first)
    info = slot.info()
    assert isinstance(info, ServerReport) and info.launches == 2 and info.replica_pid == os.getpid()
    assert info.unset_env == () and info.argv[-1] == slot.spec.argv[-1]

    slot.reconfigure(slot_config(tmp_path, "trial-001-b"))  # Serve re-sending the same config: no relaunch
    assert slot.launches == 2

    late = slot.wait_ready("trial-002-c", settle_s=0.1)  # a config that never arrives: said, not waited on forever
    assert isinstance(late, Failure) and late.kind is FailureKind.DEPLOY_ERROR and "trial-002-c" in late.message
    slot.stop_server()


def test_an_exported_replica_is_unhealthy_when_its_engine_is_gone(tmp_path: Path, monkeypatch) -> None:
    """health_follows_engine: an engine killed, or one that failed to launch, fails Serve's health check (so Serve
    replaces the replica); a study's slot replica without an engine stays healthy."""
    monkeypatch.setattr(app_mod, "with_port", lambda argv, flag, port: [argv[0], argv[1], argv[2], str(port)])
    args = app_mod.EngineArgs(
        name="prod",
        engine="sim",
        argv=[sys.executable, "-c", SERVER, "--port", "0"],
        log_dir=str(tmp_path),
        check_flags=False,
        ready_timeout_s=20,
        wait_ready_in_constructor=True,
        health_follows_engine=True,
    )
    replica = EngineServer(args.model_dump())
    replica.check_health()  # ready and alive
    os.killpg(replica.server.proc.pid, 9)
    replica.server.proc.wait(timeout=10)
    with pytest.raises(RuntimeError, match="engine server exited"):
        replica.check_health()
    broken = args.model_copy(update={"argv": [sys.executable, "-c", "import sys; sys.exit(3)", "--port", "0"]})
    with pytest.raises(RuntimeError, match="crashed_at_launch"):
        EngineServer(broken.model_dump())  # never ready: the constructor fails, Serve does not place it
    lazy = EngineServer(broken.model_copy(update={"wait_ready_in_constructor": False}).model_dump())
    deadline = time.monotonic() + 10
    while lazy.server.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(RuntimeError, match="not running"):
        lazy.check_health()
    EngineServer().check_health()  # a slot replica waiting for its first trial


def test_slot_replica_pins_its_server_and_runs_the_client_in_a_process(tmp_path: Path) -> None:
    """A GPU slot's replica: the simulated server and the benchmark client process on the slot's CPU set, the client
    outside the replica's event loop, the set reported for the record."""
    import asyncio

    from autotune.bench.types import BenchPlan, WorkloadSpec

    cpus = sorted(os.sched_getaffinity(0))
    argv = [
        sys.executable,
        "-m",
        "autotune.sim.server",
        "--sim-profile",
        "h200-llama-1b",
        "--model-path",
        "x",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--sim-time-scale",
        "10",
    ]
    args = app_mod.EngineArgs(
        name="pin",
        engine="sim",
        argv=argv,
        log_dir=str(tmp_path),
        check_flags=False,
        ready_timeout_s=60,
        slot=1,
        slots=2,
    )
    replica = EngineServer(args.model_dump())
    try:
        assert isinstance(replica.wait_ready(), Ready)
        expected = {cpus[len(cpus) - len(cpus) // 2]} if len(cpus) == 2 else None
        pinned = os.sched_getaffinity(replica.server.proc.pid)
        if expected is not None:
            assert pinned == expected  # part 2 of 2 on a 2-core machine: the second core
        assert pinned < set(cpus) or len(cpus) < 2
        plan = BenchPlan(
            workload=WorkloadSpec(input_len=16, output_len=8),
            concurrencies=(1, 2),
            requests_per_level=4,
            warmup_requests=1,
            max_windows=2,
        )
        run = asyncio.run(replica.benchmark(plan))
        assert run.ok and run.alive and run.result is not None, run.message
        assert run.result.level_order == (1, 2) and all(len(lv.windows) == 2 for lv in run.result.levels)
        report = replica.info()
        assert report.cpus is not None and set(cpusets_list(report.cpus)) == pinned
        assert report.cpu_isolation is not None and report.cpu_isolation.startswith(
            "disjoint" if len(cpus) >= 2 else "shared"
        )
    finally:
        replica.stop_server()


def cpusets_list(text: str) -> list[int]:
    from autotune.core.cpusets import parse_cpulist

    return parse_cpulist(text)


def test_a_relaunch_under_the_same_name_records_only_its_own_log(tmp_path: Path, monkeypatch) -> None:
    """A finalist relaunch resumed after an interrupt runs again under its name: the log file of the killed attempt
    is kept (appended to), but the record and the failure tail hold only this launch's lines."""
    monkeypatch.setattr(app_mod, "with_port", lambda argv, flag, port: [argv[0], argv[1], argv[2], str(port)])
    (tmp_path / "trial-004-x-f1r1.log").write_text("Load weight end. elapsed=99.0 s\nKILLED ATTEMPT\n")
    slot = EngineServer()
    slot.reconfigure(slot_config(tmp_path, "trial-004-x-f1r1"))
    assert isinstance(slot.wait_ready("trial-004-x-f1r1"), Ready)
    with slot.server.log_path.open("a") as log:
        log.write("THIS ATTEMPT\n")
    assert "KILLED ATTEMPT" not in slot.info().log_text and "THIS ATTEMPT" in slot.info().log_text
    assert "KILLED ATTEMPT" not in slot.log_tail()
    slot.stop_server()
    assert "KILLED ATTEMPT" in (tmp_path / "trial-004-x-f1r1.log").read_text()  # the file keeps both


NEVER_READY = "import time; time.sleep(600)"  # rank 0 of a multi-node server waiting for a rank that is gone


def test_a_node_rank_that_exits_before_ready_fails_the_launch_at_once_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 would wait for the dead rank until the ready timeout and die as a health timeout; the trial's failure
    is the rank's own, told when the rank exits."""
    monkeypatch.setattr(app_mod, "start_ranks", lambda spec, nnodes, log_path, owner: ["rank-1"])
    monkeypatch.setattr(app_mod, "rank_failure", lambda ranks: (1, "ValueError: unrecognized arguments: --x-flag"))
    monkeypatch.setattr("autotune.trial.launcher.RANK_CHECK_S", 0.0)
    args = app_mod.EngineArgs(
        name="mn",
        engine="sim",
        argv=[sys.executable, "-c", NEVER_READY, "--port", "0"],
        log_dir=str(tmp_path),
        check_flags=False,
        ready_timeout_s=60,
        gpus=2,
        nnodes=2,
    )
    monkeypatch.setattr(app_mod, "with_port", lambda argv, flag, port: argv)
    server = EngineServer(args.model_dump())
    t0 = time.monotonic()
    out = server.wait_ready()
    assert time.monotonic() - t0 < 10
    assert isinstance(out, Failure) and out.kind is not FailureKind.HEALTH_TIMEOUT
    assert "node rank 1" in out.message and "unrecognized arguments" in out.message
    assert not server.server.alive()
    server.ranks = []
    server.stop_server()
