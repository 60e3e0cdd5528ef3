"""An exported Serve config deploys with Ray's own commands, as docs/results.md gives them for Ray 2.60 (token auth),
serves a completion, and a replica whose engine is killed is reported unhealthy and replaced by one with a new engine.

The study is simulated, so the config deployed is the export's simulator rehearsal (``rehearse_sim_serve.yaml``: the
same deployment as ``serve_config.yaml``, with the engine the study measured). Run under the Ray lock.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from autotune.bench.client import run_plan
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.trial import LaunchSpec
from autotune.export import export_study
from autotune.space import Objective
from autotune.trial.launched import Launched
from autotune.trial.launcher import launched
from autotune.trial.records import EngineInfo, TrialOutcome, TrialRecord
from autotune.trial.registry import group_alive
from tests.conftest import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
# the CLIs of this interpreter's Ray, whichever `ray` / `serve` comes first on PATH
RAY = [sys.executable, "-m", "ray.scripts.scripts"]
SERVE = [sys.executable, "-m", "ray.serve.scripts"]
PLAN = BenchPlan(
    workload=WorkloadSpec(input_len=16, output_len=8), concurrencies=(1,), rounds=1, min_requests=2, warmup_requests=1
)
ENGINE = EngineInfo(
    engine="sim",
    version="0",
    simulated=True,
    gpu_name="SIMULATED NVIDIA H200",
    gpu_count=1,
    profile="h200-llama-1b",
    time_scale=10.0,
)


def _export(root: Path) -> Path:
    port = free_port()
    argv = (
        sys.executable,
        "-m",
        "autotune.sim.server",
        "--sim-profile",
        "h200-llama-1b",
        "--sim-time-scale",
        "10.0",
        "--model-path",
        "/models/llama-1b",
        "--tp-size",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    )
    spec = LaunchSpec(engine="sim", argv=argv, env={}, host="127.0.0.1", port=port, gpus=0, ready_timeout_s=60)
    with launched(spec, root / "measure.log") as server:
        bench = run_plan(server.base_url, PLAN)
    record = TrialRecord(
        study="deploy",
        trial_id="t0",
        number=0,
        params={},
        flags={},
        env={},
        argv=list(argv),
        launch=Launched.from_argv("sim", argv),
        outcome=TrialOutcome.COMPLETE,
        engine=ENGINE,
        bench=bench,
        objectives={"output_tok_per_s@max": 1.0},
        feasible=True,
    )
    result = export_study(
        root,
        study_name="deploy",
        objectives=[Objective("output_tok_per_s", "max", "maximize")],
        records=[record],
        load_levels=[1],
    )
    assert result.rehearsal_serve_config is not None
    return result.rehearsal_serve_config


def _serve_status(env: dict[str, str], dash: str) -> dict:
    out = subprocess.run([*SERVE, "status", "-a", dash], capture_output=True, text=True, timeout=60, env=env)
    return yaml.safe_load(out.stdout) or {} if out.returncode == 0 else {}


def _deployment(status: dict, app: str) -> tuple[str, str]:
    detail = (status.get("applications") or {}).get(app) or {}
    dep = (detail.get("deployments") or {}).get("EngineServer") or {}
    return str(detail.get("status")), str(dep.get("status"))


def _wait(what: str, predicate, timeout_s: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def test_deploy_serves_and_a_dead_engine_replaces_the_replica(tmp_path: Path) -> None:
    config = _export(tmp_path)
    doc = yaml.safe_load(config.read_text())
    app = doc["applications"][0]["name"]
    route = doc["applications"][0]["route_prefix"]
    http = f"http://127.0.0.1:{doc['http_options']['port']}"
    gcs, dash_port = free_port(), free_port()
    dash = f"http://127.0.0.1:{dash_port}"
    # Ray 2.60 enables token auth where a token exists; the CLI sends it only with RAY_AUTH_MODE=token (docs).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_AUTH_MODE": "token", "RAY_memory_monitor_refresh_ms": "0"}
    subprocess.run([*RAY, "get-auth-token", "--generate"], capture_output=True, env=env, timeout=60, check=True)
    head = subprocess.Popen(
        [
            *RAY,
            "start",
            "--head",
            "--port",
            str(gcs),
            "--dashboard-port",
            str(dash_port),
            "--num-cpus",
            "4",
            "--disable-usage-stats",
            "--block",
        ],
        env=env,
        stdout=open(tmp_path / "ray.log", "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        _wait("the Ray dashboard", lambda: _dashboard_up(dash), 90)
        deploy = subprocess.run(
            [*SERVE, "deploy", str(config), "-a", dash], capture_output=True, text=True, timeout=120, env=env
        )
        assert deploy.returncode == 0, deploy.stdout + deploy.stderr
        # polled on the dashboard's REST API (a `serve status` process per poll costs seconds of CPU), then confirmed
        # with `serve status`
        _wait("the app RUNNING", lambda: _api_status(dash, app) == ("RUNNING", "HEALTHY"), 120)
        _wait("serve status RUNNING", lambda: _deployment(_serve_status(env, dash), app) == ("RUNNING", "HEALTHY"), 30)
        with httpx.Client(timeout=60, trust_env=False) as client:
            first = _completion(client, http + route)
            pid = client.get(f"{http}{route}/autotune/status").json()["engine_pid"]
            assert pid and group_alive(pid)
            (old_replica,) = _wait("one running replica", lambda: _replicas(dash, app, "RUNNING"), 30)
            t_kill = time.monotonic()
            os.killpg(pid, signal.SIGKILL)
            # Serve's next health check fails (the engine is gone): the deployment is reported unhealthy, the replica
            # is stopped, and a new one (with a new engine) takes its place.
            seen: set[str] = set()

            def replaced() -> bool:
                seen.update(_statuses(dash, app, old_replica))
                return "deployment:UNHEALTHY" in seen and bool(set(_replicas(dash, app, "RUNNING")) - {old_replica})

            _wait(f"the replica reported unhealthy and replaced (seen: {seen})", replaced, 80)
            replaced_after = time.monotonic() - t_kill
            print(
                f"engine {pid} killed; replica {old_replica} reported unhealthy and replaced in {replaced_after:.1f} s "
                f"(seen: {sorted(seen)})"
            )
            _wait("the app HEALTHY again", lambda: _api_status(dash, app) == ("RUNNING", "HEALTHY"), 30)
            _wait(
                "serve status HEALTHY", lambda: _deployment(_serve_status(env, dash), app) == ("RUNNING", "HEALTHY"), 30
            )
            new_pid = _wait("the new engine", lambda: _new_pid(client, f"{http}{route}", pid), 30)
            assert new_pid != pid and group_alive(new_pid)
            second = _completion(client, http + route)
        assert first and second and replaced_after < 90
    finally:
        engines = [p for p in (locals().get("pid"), locals().get("new_pid")) if p]
        subprocess.run([*SERVE, "shutdown", "-y", "-a", dash], capture_output=True, env=env, timeout=120)
        _stop_head(head)
    leftover = [p for p in engines if group_alive(p)]
    for p in leftover:  # this test's own engine servers, if Serve's shutdown did not stop them
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p, signal.SIGKILL)
    assert not leftover, f"engine process groups {leftover} outlived serve shutdown"


def _stop_head(head: subprocess.Popen[bytes]) -> None:
    """Stop the `ray start --block` head as Ray's CLI does on Ctrl-C: SIGTERM to it alone, which stops the node's
    processes in order (a SIGTERM to the whole group at once takes Ray about 30 s to wind down). Whatever of the group
    is still there after that is killed."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(head.pid, signal.SIGTERM)
    try:
        head.wait(timeout=60)
    except subprocess.TimeoutExpired:
        head.kill()
        head.wait(timeout=30)
    deadline = time.monotonic() + 15
    while group_alive(head.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)


def _token() -> dict[str, str]:
    token = Path.home() / ".ray" / "auth_token"
    return {"Authorization": f"Bearer {token.read_text().strip()}"} if token.exists() else {}


def _serve_app(dash: str, app: str) -> dict:
    try:
        r = httpx.get(f"{dash}/api/serve/applications/", headers=_token(), timeout=5, trust_env=False)
        return (r.json().get("applications") or {}).get(app) or {} if r.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}


def _serve_api(dash: str, app: str) -> dict:
    return (_serve_app(dash, app).get("deployments") or {}).get("EngineServer") or {}


def _api_status(dash: str, app: str) -> tuple[str, str]:
    """As _deployment of `serve status`, from the dashboard's REST API."""
    return _deployment({"applications": {app: _serve_app(dash, app)}}, app)


def _replicas(dash: str, app: str, state: str) -> list[str]:
    return [r["replica_id"] for r in _serve_api(dash, app).get("replicas") or [] if r.get("state") == state]


def _statuses(dash: str, app: str, replica: str) -> set[str]:
    dep = _serve_api(dash, app)
    out = {f"deployment:{dep.get('status')}"} if dep else set()
    out |= {f"old replica:{r.get('state')}" for r in dep.get("replicas") or [] if r.get("replica_id") == replica}
    return out


def _dashboard_up(dash: str) -> bool:
    try:
        return httpx.get(f"{dash}/api/version", timeout=2, trust_env=False).status_code in (200, 401, 403)
    except httpx.HTTPError:
        return False


def _completion(client: httpx.Client, base: str) -> str:
    r = client.post(f"{base}/v1/completions", json={"model": "m", "prompt": "hello", "max_tokens": 4})
    assert r.status_code == 200, r.text
    return str(r.json()["choices"][0]["text"])


def _new_pid(client: httpx.Client, base: str, old: int) -> int | None:
    try:
        pid = client.get(f"{base}/autotune/status").json().get("engine_pid")
    except (httpx.HTTPError, ValueError):
        return None
    return pid if pid and pid != old else None
