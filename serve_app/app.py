"""``EngineServer``: a Ray Serve deployment whose replica starts the engine process, owns its lifetime, and proxies to it.

In a study, the trial runner deploys one application per trial (``trial-<n>-<id>``, visible in the Ray dashboard), asks
the replica to wait for readiness, to benchmark its server on the same node, and to shut it down. In production the
exported ``serve_config.yaml`` deploys the same class with ``wait_ready_in_constructor: true``: the replica becomes
healthy only when the engine answers, and HTTP requests to its route are proxied to the engine on loopback.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from autotune import gpus
from autotune.engines import get_engine
from autotune.engines.preflight import preflight
from autotune.errors import AutotuneError, LaunchError
from autotune.launcher import ServerProcess, wait_gpus_free
from autotune.records import FailureKind
from autotune.trial import LaunchSpec


class EngineArgs(BaseModel):
    """The application's arguments (``args:`` in a Serve config file)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="application / server name, used for the log file")
    engine: str = Field(description="'sglang' or 'sim'")
    argv: list[str] = Field(description="exact server argv; '--port 0' means: pick a free port on the replica's node")
    env: dict[str, str] = Field(default_factory=dict, description="variables set for the server")
    unset_env: list[str] = Field(default_factory=list, description="inherited variables removed (e.g. OMP_NUM_THREADS)")
    host: str = "127.0.0.1"
    port: int = 0
    gpus: int = 1
    ready_timeout_s: float = 900.0
    log_dir: str | None = None
    wait_ready_in_constructor: bool = False
    check_flags: bool = True
    owner: str | None = Field(default=None, description="study that owns the server (orphan sweep after a killed driver)")


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _with_port(argv: list[str], flag: str, port: int) -> list[str]:
    out = list(argv)
    if flag in out:
        out[out.index(flag) + 1] = str(port)
    return out


GPU_WAIT_TIMEOUT_S = 60.0


def _wait_gpus_before_launch(gpu_ids: list[str]) -> float | None:
    """Seconds until this replica's GPUs read free (None without GPUs or nvidia-smi); a clear error if they stay busy."""
    if not gpu_ids:
        return None
    try:
        return wait_gpus_free(gpu_ids, timeout_s=GPU_WAIT_TIMEOUT_S)
    except LaunchError as exc:
        raise LaunchError(
            FailureKind.DEPLOY_ERROR,
            f"GPU(s) {','.join(gpu_ids)} still in use {GPU_WAIT_TIMEOUT_S:.0f} s before the launch "
            f"({exc}). Another process holds them: a previous server that did not exit, or a process outside "
            "autotune; check `nvidia-smi` and free them, then rerun the same command (finished trials are kept).",
        ) from exc


@serve.deployment(
    name="EngineServer",
    max_ongoing_requests=4096,
    health_check_period_s=10,
    health_check_timeout_s=60,
    graceful_shutdown_wait_loop_s=0.1,  # the engine is stopped explicitly first; nothing is left to drain
    graceful_shutdown_timeout_s=15,
)
class EngineServer:
    def __init__(self, args: dict[str, Any]) -> None:
        self.init_epoch = time.time()
        self.args = EngineArgs.model_validate(args)
        self.node = socket.gethostname()
        self.gpu_ids = gpus.visible_ids()
        self.failure: dict[str, Any] | None = None
        self.server: ServerProcess | None = None
        self.ready_s: float | None = None
        self.teardown_s: float | None = None
        port = self.args.port or _free_port(self.args.host)
        argv = _with_port(self.args.argv, "--port", port)
        if "--nccl-port" in argv and argv[argv.index("--nccl-port") + 1] == "0":
            argv = _with_port(argv, "--nccl-port", _free_port(self.args.host))
        spec = LaunchSpec(
            engine=self.args.engine,
            argv=tuple(argv),
            env=self.args.env,
            host=self.args.host,
            port=port,
            gpus=self.args.gpus,
            unset_env=tuple(self.args.unset_env),
            ready_timeout_s=self.args.ready_timeout_s,
        )
        log_dir = Path(self.args.log_dir or os.environ.get("AUTOTUNE_LOG_DIR", "/tmp/autotune-logs"))
        self.log_path = log_dir / f"{self.args.name}.log"
        engine = get_engine(self.args.engine)
        self.release = engine.release()
        self.preflight_s: float | None = None
        self.gpu_wait_s: float | None = None
        try:
            if self.args.check_flags:
                t0 = time.monotonic()
                spec = preflight(engine, spec, release=self.release)
                self.preflight_s = time.monotonic() - t0
            self.gpu_wait_s = _wait_gpus_before_launch(self.gpu_ids)
            self.server = ServerProcess(spec, self.log_path, owner=self.args.owner)
            self.server.start()
        except LaunchError as exc:
            self.failure = {"kind": exc.kind.value, "message": str(exc), "log_tail": exc.log_tail}
        except AutotuneError as exc:
            self.failure = {"kind": FailureKind.UNKNOWN_FLAG.value, "message": str(exc), "log_tail": ""}
        self.spec = spec
        if self.args.wait_ready_in_constructor:
            result = self.wait_ready()
            if not result["ok"]:
                raise RuntimeError(f"{result['kind']}: {result['message']}\n{result['log_tail']}")

    # --- used by the trial runner through the deployment handle -------------------------------------------
    def wait_ready(self) -> dict[str, Any]:
        """Block until the engine is ready. Returns {"ok": True, "ready_s"} or the failure (kind, message, log tail)."""
        if self.failure is not None:
            return {"ok": False, **self.failure}
        if self.server is None:
            return {"ok": False, "kind": FailureKind.UNKNOWN.value, "message": "no server", "log_tail": ""}
        if self.ready_s is not None:
            return {"ok": True, "ready_s": self.ready_s}
        try:
            self.ready_s = self.server.wait_ready()
        except LaunchError as exc:
            self.failure = {"kind": exc.kind.value, "message": str(exc), "log_tail": exc.log_tail}
            return {"ok": False, **self.failure}
        return {"ok": True, "ready_s": self.ready_s}

    async def benchmark(self, plan_json: str) -> dict[str, Any]:
        """Run the benchmark against the local engine (same node: no network hop in the latencies)."""
        from autotune.bench.client import arun_plan
        from autotune.bench.plan_codec import plan_from_json

        plan = plan_from_json(plan_json)
        t0 = time.monotonic()
        try:
            result = await arun_plan(self.spec.base_url, plan)
        except AutotuneError as exc:
            alive = self.server is not None and self.server.alive()
            return {"ok": False, "alive": alive, "message": str(exc), "log_tail": self.log_tail(), "bench_s": time.monotonic() - t0}
        alive = self.server is not None and self.server.alive()
        return {"ok": True, "alive": alive, "result": result.to_json(), "bench_s": time.monotonic() - t0}

    def info(self) -> dict[str, Any]:
        """Everything the record needs about this server: argv, env, node, GPUs, versions, server_info, log phases."""
        server_info: dict[str, Any] | None = None
        if self.server is not None and self.server.alive():
            try:
                with httpx.Client(timeout=10, trust_env=False) as c:
                    for path in ("/server_info", "/get_server_info"):
                        r = c.get(self.spec.base_url + path)
                        if r.status_code == 200:
                            server_info = r.json()
                            break
            except httpx.HTTPError:
                server_info = None
        log_text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return {
            "argv": list(self.spec.argv),
            "env": dict(self.spec.env),
            "unset_env": list(self.spec.unset_env),
            "node": self.node,
            "gpu_ids": self.gpu_ids,
            "gpu_names": gpus.names(self.gpu_ids or None),
            "release": self.release,
            "server_info": server_info,
            "log_text": log_text[-200_000:],
            "omp_num_threads_in_replica": os.environ.get("OMP_NUM_THREADS"),
            "ready_s": self.ready_s,
            "init_epoch": self.init_epoch,
            "preflight_s": self.preflight_s,
            "gpu_wait_s": self.gpu_wait_s,
        }

    def log_tail(self) -> str:
        return self.server.log_tail() if self.server is not None else ""

    def stop_server(self, grace_s: float = 0.0, defer: bool = False) -> dict[str, Any]:
        """Stop the engine's whole process group and check that its GPUs are free again.

        A trial's server is disposable: SIGKILL to the group frees the GPU in 1-2 s, SIGTERM's drain takes 7 s
        (measured on the H200). Production deployments pass a grace period.

        ``defer=True`` (the trial runner): SIGKILL the group and return at once; a thread reaps it. The GPU-free check
        then happens where it matters, before the next launch on these GPUs (``gpu_wait_s``), so the exit overlaps
        Ray Tune starting the next trial and Serve placing its replica.
        """
        if self.server is None:
            return {"teardown_s": 0.0, "gpu_free_s": None}
        t0 = time.monotonic()
        if defer:
            server, self.server = self.server, None
            server.kill()
            threading.Thread(target=server.stop, kwargs={"grace_s": 0.0}, name="reap-engine", daemon=True).start()
            self.teardown_s = time.monotonic() - t0
            return {"teardown_s": self.teardown_s, "gpu_free_s": None, "error": "", "deferred": True}
        self.server.stop(grace_s=grace_s)
        gpu_free_s: float | None = None
        error = ""
        try:
            gpu_free_s = wait_gpus_free(self.gpu_ids or None)
        except LaunchError as exc:
            error = str(exc)
        self.teardown_s = time.monotonic() - t0
        self.server = None
        return {"teardown_s": self.teardown_s, "gpu_free_s": gpu_free_s, "error": error,
                "gpu_mem_mib": gpus.memory_used_mib(self.gpu_ids or None)}

    def check_health(self) -> None:
        """Serve calls this periodically: a server that died after becoming ready makes the replica unhealthy."""
        if self.ready_s is not None and self.server is not None and not self.server.alive():
            raise RuntimeError(f"engine server exited; log tail:\n{self.server.log_tail(20)}")

    def __del__(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.stop(grace_s=2.0)

    # --- production traffic: proxy HTTP to the engine on loopback ------------------------------------------
    async def __call__(self, request: Request) -> Response:
        route = request.scope.get("root_path", "")
        path = request.url.path[len(route):] or "/"
        if path == "/autotune/status":
            return JSONResponse({"ready": self.ready_s is not None, "failure": self.failure, "argv": list(self.spec.argv)})
        body = await request.body()
        client = httpx.AsyncClient(timeout=None, trust_env=False)
        upstream = client.build_request(
            request.method, self.spec.base_url + path, params=request.query_params, content=body,
            headers={"content-type": request.headers.get("content-type", "application/json")},
        )
        resp = await client.send(upstream, stream=True)
        streaming = "text/event-stream" in resp.headers.get("content-type", "") or _wants_stream(body)

        if streaming:
            async def relay():  # type: ignore[no-untyped-def]
                try:
                    async for chunk in resp.aiter_raw():
                        yield chunk
                finally:
                    await resp.aclose()
                    await client.aclose()

            return StreamingResponse(relay(), status_code=resp.status_code, media_type=resp.headers.get("content-type"))
        data = await resp.aread()
        await resp.aclose()
        await client.aclose()
        return Response(data, status_code=resp.status_code, media_type=resp.headers.get("content-type"))


def _wants_stream(body: bytes) -> bool:
    try:
        return bool(json.loads(body or b"{}").get("stream"))
    except (ValueError, AttributeError):
        return False


def build_app(args: dict[str, Any]) -> serve.Application:
    """Application builder for ``serve deploy`` / ``serve run serve_app.app:build_app``."""
    parsed = EngineArgs.model_validate(args)
    return EngineServer.options(ray_actor_options={"num_gpus": parsed.gpus, "num_cpus": 1}).bind(parsed.model_dump())
