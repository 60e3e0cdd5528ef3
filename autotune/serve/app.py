"""``EngineServer``: a Ray Serve deployment whose replica starts the engine process, owns its lifetime, and proxies to it.

In a study, each trial deploys its engine with ``serve.run`` onto one of the study's GPU slot applications
(``<study>-<id>-slot-<k>``, one per trial that can run at once, visible in the Ray dashboard with the trial's config as the
deployment's ``user_config``), then asks the replica to wait for readiness, to benchmark its server on the same node, and
to shut it down. In production the
exported ``serve_config.yaml`` deploys the same class with ``wait_ready_in_constructor: true``: the replica becomes
healthy only when the engine answers, and HTTP requests to its route are proxied to the engine on loopback.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from autotune.bench.types import BenchPlan
from autotune.core import cpusets, gpus
from autotune.core.errors import AutotuneError, LaunchError
from autotune.core.failures import FailureKind
from autotune.core.trial import LaunchSpec
from autotune.engines import get_engine
from autotune.engines.preflight import preflight
from autotune.progress import monitor as progress
from autotune.progress.events import Phase, TrialEvent
from autotune.serve.launch_prep import (
    EngineArgs,
    failure_of,
    free_port,
    wait_gpus_before_launch,
    with_interpreter,
    with_port,
)
from autotune.serve.proxy import EngineProxy
from autotune.serve.ranks import rank_argv, rank_failure, rank_logs, start_ranks, stop_ranks
from autotune.trial import registry
from autotune.trial.launcher import ServerProcess, exited_before_ready, wait_gpus_free
from autotune.trial.replica import BenchRun, Failure, Ready, ServerReport, Teardown, clip_log


@serve.deployment(
    name="EngineServer",
    max_ongoing_requests=4096,
    health_check_period_s=10,
    health_check_timeout_s=60,
    graceful_shutdown_wait_loop_s=0.1,  # the engine is stopped explicitly first; nothing is left to drain
    graceful_shutdown_timeout_s=15,
)
class EngineServer:
    """One engine server per replica at a time; implements ``autotune.trial.replica.Replica`` for the trial runner.

    Built with ``args`` (production, or one application per trial), the constructor launches the engine. A study's GPU
    slot application is built without ``args`` and gets each trial's engine through ``user_config``: Serve calls
    :meth:`reconfigure` on the live replica, so a trial does not pay for a new Ray worker process and its imports
    (seconds per trial; ``docs/architecture.md``).
    """

    def __init__(self, args: dict[str, Any] | None = None) -> None:
        self.node = socket.gethostname()
        self.gpu_ids = gpus.visible_ids()
        self.node_gpus = gpus.count()  # physical GPUs on the node (0 without nvidia-smi: the simulator)
        self.pid = os.getpid()
        self.launches = 0  # engines this replica has started (more than 1: a GPU slot reused across trials)
        self.server: ServerProcess | None = None
        self.args: EngineArgs | None = None
        self.spec: LaunchSpec | None = None
        self.proxy = EngineProxy()
        self._reset_trial_state()
        if args is not None:
            self._launch(EngineArgs.model_validate(args))

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Serve's in-place update (``user_config``): stop the current engine, if any, and launch the new one.

        Never raises: a launch failure is kept for ``wait_ready`` to report, and the replica stays healthy for the next
        trial."""
        args = EngineArgs.model_validate(config)
        if self.args is not None and args.name == self.args.name:
            return  # the same trial's config again (Serve re-sends it after a replica restart): already launched
        self.stop_server(defer=True)  # the previous trial's engine, if the runner has not stopped it
        self._launch(args)

    def _reset_trial_state(self) -> None:
        self.init_epoch = time.time()  # when this replica began the launch (phases.replica_start_s)
        self.failure: Failure | None = None
        self.ready_s: float | None = None
        self.teardown_s: float | None = None
        self.preflight_s: float | None = None
        self.gpu_wait_s: float | None = None
        self.orphans_killed = 0  # servers of a dead replica of this study killed before this launch
        self.cpu_plan: cpusets.CpuPlan | None = None  # the CPUs this trial's server and client run on
        self.cpu_note = ""  # why pinning failed, if it did
        self.ranks: list[Any] = []  # the other node ranks of a multi-node server (autotune.serve.ranks)

    def _pin(self, args: EngineArgs) -> None:
        """Pin the new server to this slot's CPU set (children it starts later inherit it); the client follows."""
        self.cpu_plan = cpusets.plan_here(
            gpu_ids=self.gpu_ids,
            node_gpus=self.node_gpus,
            gpus_per_slot=args.gpus,
            slot=args.slot,
            slots=args.slots,
            enabled=args.cpu_isolation,
        )
        proc = self.server.proc if self.server is not None else None
        self.cpu_note = cpusets.apply(proc.pid, self.cpu_plan) if proc is not None else ""

    def _launch(self, args: EngineArgs) -> None:
        self._reset_trial_state()
        self.args = args
        port = args.port or free_port(args.host)
        argv = with_port(with_interpreter(args.argv), "--port", port)
        if "--nccl-port" in argv and argv[argv.index("--nccl-port") + 1] == "0":
            argv = with_port(argv, "--nccl-port", free_port(args.host))
        if args.nnodes > 1:  # node rank 0 here; the other ranks join it at this node's address
            import ray.util

            here = ray.util.get_node_ip_address()
            argv = rank_argv(argv, 0, f"{here}:{free_port(here)}")
        spec = LaunchSpec(
            engine=args.engine,
            argv=tuple(argv),
            env=args.env,
            host=args.host,
            port=port,
            gpus=args.gpus,
            unset_env=tuple(args.unset_env),
            ready_timeout_s=args.ready_timeout_s,
            nnodes=args.nnodes,
        )
        log_dir = Path(args.log_dir or os.environ.get("AUTOTUNE_LOG_DIR", "/tmp/autotune-logs"))
        self.log_path = log_dir / f"{args.name}.log"
        engine = get_engine(args.engine)
        self.release = engine.release()
        try:
            if args.check_flags:
                t0 = time.monotonic()
                spec = preflight(engine, spec, release=self.release)
                self.preflight_s = time.monotonic() - t0
            if args.owner:
                self.orphans_killed = len(registry.sweep_orphans(args.owner))  # left by a replica Ray restarted
            self.gpu_wait_s = wait_gpus_before_launch(self.gpu_ids)
            self.server = ServerProcess(spec, self.log_path, owner=args.owner)
            self.server.start()
            self.ranks = start_ranks(spec, args.nnodes, self.log_path, args.owner)
            self.launches += 1
            self._pin(args)
        except AutotuneError as exc:
            self.failure = failure_of(exc)
        self.spec = spec
        if args.wait_ready_in_constructor:
            result = self.wait_ready()
            if isinstance(result, Failure):
                raise RuntimeError(f"{result.kind.value}: {result.message}\n{result.log_tail}")

    # --- used by the trial runner through the deployment handle -------------------------------------------
    def wait_ready(self, expected: str | None = None, settle_s: float = 30.0) -> Ready | Failure:
        """Block until the engine is ready; the failure (kind, message, log tail) when it will not be.

        ``expected``: the trial whose engine the caller deployed; on a GPU slot, wait up to ``settle_s`` for Serve to
        deliver that trial's ``user_config`` before answering for it."""
        deadline = time.monotonic() + settle_s
        while expected is not None and (self.args is None or self.args.name != expected):
            if time.monotonic() > deadline:
                current = self.args.name if self.args else None
                return Failure(
                    FailureKind.DEPLOY_ERROR,
                    f"Ray Serve did not deliver {expected}'s config to its GPU slot in {settle_s:g} s "
                    f"(the replica runs {current})",
                )
            time.sleep(0.05)
        if self.failure is not None:
            return self.failure
        if self.server is None:
            return Failure(FailureKind.UNKNOWN, "no server")
        if self.ready_s is not None:
            return Ready(self.ready_s)
        try:
            self.ready_s = self.server.wait_ready(peers=self._rank_gone if self.ranks else None)
        except LaunchError as exc:
            self.failure = failure_of(exc)
            return self.failure
        return Ready(self.ready_s)

    def _rank_gone(self) -> LaunchError | None:
        """Why a node rank of this multi-node server exited before it was ready (rank 0 would wait for it until the
        ready timeout), or None while they all run."""
        gone = rank_failure(self.ranks)
        if gone is None:
            return None
        rank, tail = gone
        return exited_before_ready(f"node rank {rank} exited", tail)

    async def benchmark(self, plan: BenchPlan) -> BenchRun:
        """Run the benchmark against the local engine (same node: no network hop in the latencies), in a client process
        of its own (not this replica's event loop), with Ray's thread caps removed and pinned to the slot's CPUs."""
        from autotune.bench.subproc import arun_plan_in_subprocess

        t0 = time.monotonic()
        plan_cpus = self.cpu_plan.cpus if self.cpu_plan is not None and self.cpu_plan.how != "off" else None
        try:
            result = await arun_plan_in_subprocess(
                self.spec.base_url,  # type: ignore[union-attr]  # the controller benchmarks only after the engine launched (spec set)
                plan,
                cpus=plan_cpus,
                on_level=self._level_started,
            )
        except AutotuneError as exc:
            alive = self.server is not None and self.server.alive()
            return BenchRun(
                ok=False, alive=alive, bench_s=time.monotonic() - t0, message=str(exc), log_tail=self.log_tail()
            )
        alive = self.server is not None and self.server.alive()
        return BenchRun(ok=True, alive=alive, bench_s=time.monotonic() - t0, result=result)

    def _level_started(self, index: int, count: int, concurrency: int) -> None:
        """Tell the study's monitor that load level ``index`` of ``count`` began (the driver prints it)."""
        args = self.args
        if args is None or args.trial_number is None:
            return
        progress.send(
            args.owner,
            TrialEvent(
                args.trial_number,
                args.trial_id or "",
                Phase.BENCHMARKING,
                level=index,
                levels=count,
                concurrency=concurrency,
            ),
        )

    def info(self) -> ServerReport:
        """Everything the record needs about this server: argv, env, node, GPUs, versions, server_info, log phases."""
        server_info: dict[str, Any] | None = None
        if self.spec is None:
            return ServerReport(
                node=self.node,
                gpu_ids=tuple(self.gpu_ids),
                gpu_names=tuple(gpus.names(self.gpu_ids or None)),
                replica_pid=self.pid,
                launches=self.launches,
            )
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
        log_text = self.server.log_text() if self.server is not None else ""
        if self.ranks:
            log_text += "\n" + rank_logs(self.ranks)
        return ServerReport(
            argv=tuple(self.spec.argv),
            env=dict(self.spec.env),
            unset_env=tuple(self.spec.unset_env),
            node=self.node,
            gpu_ids=tuple(self.gpu_ids),
            gpu_names=tuple(gpus.names(self.gpu_ids or None)),
            release=self.release,
            server_info=server_info,
            log_text=clip_log(log_text),
            ready_s=self.ready_s,
            init_epoch=self.init_epoch,
            preflight_s=self.preflight_s,
            gpu_wait_s=self.gpu_wait_s,
            replica_pid=self.pid,
            launches=self.launches,
            orphans_killed=self.orphans_killed,
            omp_num_threads_in_replica=os.environ.get("OMP_NUM_THREADS"),
            cpus=self.cpu_plan.cpulist if self.cpu_plan is not None else None,
            cpu_isolation=self._cpu_text(),
        )

    def _cpu_text(self) -> str | None:
        if self.cpu_plan is None:
            return None
        text = f"{self.cpu_plan.how}: {self.cpu_plan.detail}" if self.cpu_plan.detail else self.cpu_plan.how
        return f"{text}; {self.cpu_note}" if self.cpu_note else text

    def log_tail(self) -> str:
        return self.server.log_tail() if self.server is not None else ""

    def stop_server(self, grace_s: float = 0.0, defer: bool = False) -> Teardown:
        """Stop the engine's whole process group and check that its GPUs are free again.

        A trial's server is disposable: SIGKILL to the group frees the GPU in 1-2 s, SIGTERM's drain takes 7 s
        (measured on the H200). Production deployments pass a grace period.

        ``defer=True`` (the trial runner): SIGKILL the group and return at once; a thread reaps it. The GPU-free check
        then happens where it matters, before the next launch on these GPUs (``gpu_wait_s``), so the exit overlaps
        Ray Tune starting the next trial and Serve placing its replica.
        """
        if self.ranks:  # the other nodes of a multi-node server first: rank 0 is stopped below
            ranks, self.ranks = self.ranks, []
            stop_ranks(ranks)
        if self.server is None:
            return Teardown()
        t0 = time.monotonic()
        if defer:
            server, self.server = self.server, None
            server.kill()
            threading.Thread(target=server.stop, kwargs={"grace_s": 0.0}, name="reap-engine", daemon=True).start()
            self.teardown_s = time.monotonic() - t0
            return Teardown(teardown_s=self.teardown_s, deferred=True)
        self.server.stop(grace_s=grace_s)
        gpu_free_s: float | None = None
        error = ""
        try:
            gpu_free_s = wait_gpus_free(self.gpu_ids or None)
        except LaunchError as exc:
            error = str(exc)
        self.teardown_s = time.monotonic() - t0
        self.server = None
        return Teardown(
            teardown_s=self.teardown_s,
            gpu_free_s=gpu_free_s,
            error=error,
            gpu_mem_mib=gpus.memory_used_mib(self.gpu_ids or None),
        )

    def check_health(self) -> None:
        """Serve calls this periodically. An engine that died after becoming ready makes the replica unhealthy; with
        ``health_follows_engine`` (an exported config) so does one that failed or never came up, and Serve replaces
        the replica, which starts a new engine."""
        if self.ready_s is not None and self.server is not None and not self.server.alive():
            raise RuntimeError(f"engine server exited; log tail:\n{self.server.log_tail(20)}")
        if self.args is None or not self.args.health_follows_engine:
            return
        if self.failure is not None:
            raise RuntimeError(f"engine failed: {self.failure.kind.value}: {self.failure.message}")
        if self.server is None or not self.server.alive():
            tail = self.server.log_tail(20) if self.server is not None else ""
            raise RuntimeError(f"engine server is not running; log tail:\n{tail}")

    def __del__(self) -> None:
        server = getattr(self, "server", None)
        if server is not None:
            server.stop(grace_s=2.0)

    # --- production traffic: proxy HTTP to the engine on loopback ------------------------------------------
    async def __call__(self, request: Request) -> Response:
        route = request.scope.get("root_path", "")
        path = request.url.path[len(route) :] or "/"
        if path == "/autotune/status":
            failure = asdict(self.failure) if self.failure is not None else None
            return JSONResponse(
                {
                    "ready": self.ready_s is not None,
                    "failure": failure,
                    "trial": self.args.name if self.args else None,
                    "engine_pid": self.server.proc.pid if self.server and self.server.proc else None,
                    "argv": list(self.spec.argv) if self.spec else [],
                }
            )
        if self.spec is None:
            return JSONResponse({"error": "no engine on this replica yet"}, status_code=503)
        return await self.proxy.forward(request, self.spec.base_url, path)


def build_app(args: dict[str, Any]) -> serve.Application:
    """Application builder for ``serve deploy`` / ``serve run autotune.serve.app:build_app``; ``serve_app.app:build_app`` is the same."""
    parsed = EngineArgs.model_validate(args)
    per_node = parsed.gpus // max(1, parsed.nnodes)
    placement: dict[str, Any] = {}
    if parsed.nnodes > 1:  # node rank 0 here, the other ranks on the other bundles (autotune.serve.ranks)
        placement = {
            "placement_group_bundles": [{"CPU": 1, "GPU": per_node} for _ in range(parsed.nnodes)],
            "placement_group_strategy": "STRICT_SPREAD",
        }
    dep = EngineServer.options(  # type: ignore[attr-defined]  # @serve.deployment makes the class a Deployment; Ray's decorator is not typed as such
        ray_actor_options={"num_gpus": per_node, "num_cpus": 1}, **placement
    )
    return dep.bind(parsed.model_dump())


SLOT_VERSION = "autotune-gpu-slot"
NODE_ID_LABEL = "ray.io/node-id"  # the label Ray gives every node (its node id)


def slot_placement(gpus_per_node: int, nodes: tuple[str, ...]) -> dict[str, Any]:
    """The Serve placement options of a GPU slot on ``nodes``: a placement group of one bundle per node (the node's
    share of the slot's GPUs and one CPU), each bundle pinned to its node by the ``ray.io/node-id`` label. The
    replica takes the first bundle; a multi-node server's other ranks take the others. No nodes: no pin."""
    if not nodes:
        return {}
    bundle: dict[str, float] = {"CPU": 1, "GPU": gpus_per_node} if gpus_per_node else {"CPU": 1}
    return {
        "placement_group_bundles": [dict(bundle) for _ in nodes],
        "placement_group_strategy": "STRICT_PACK" if len(nodes) == 1 else "STRICT_SPREAD",
        "placement_group_bundle_label_selector": [{NODE_ID_LABEL: nid} for nid in nodes],
    }


def build_slot_app(args: dict[str, Any], nodes: tuple[str, ...] = ()) -> serve.Application:
    """A study's GPU slot: the same deployment, the trial's engine passed as ``user_config``.

    ``nodes``: the node(s) the slot lives on (``autotune.trial.slots.Slot.nodes``); the replica is then placed in the
    slot's placement group (:func:`slot_placement`), so its GPUs stay on its node and a node's slots do not move.
    Without them Ray places the replica wherever GPUs are free (a trial run outside the driver's placement).

    Redeploying it with another trial's config under the same name is an in-place update: Serve keeps the replica and
    calls ``reconfigure``, as long as the code version stays the same. Ray 2.60 draws a random version for every
    ``serve.run`` of an application object unless the deployment carries one (``Deployment._version``; the public
    ``options(version=)`` was removed), so it is pinned here; where a Ray release lacks that attribute, every trial
    gets a new replica, which is slower but just as correct."""
    parsed = EngineArgs.model_validate(args)
    per_node = parsed.gpus // max(1, parsed.nnodes)
    dep = EngineServer.options(  # type: ignore[attr-defined]  # @serve.deployment makes the class a Deployment; Ray's decorator is not typed as such
        ray_actor_options={"num_gpus": per_node, "num_cpus": 1},
        user_config=parsed.model_dump(),
        **slot_placement(per_node, nodes),
    )
    if hasattr(dep, "_version"):
        dep._version = SLOT_VERSION
    return dep.bind()
