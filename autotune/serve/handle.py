"""The trial runner's side of the Serve boundary: deploy a trial's server (``ServeDeployer``) and call its replica
through a deployment handle (``ServeReplica``, an ``autotune.trial.replica.Replica``).

Ray's own exceptions stop here: each is translated into ``ReplicaError`` (``raise ... from exc``), whose failure kind
``autotune.core.errors.failure_kind`` knows. The runner never sees a Ray type.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from autotune.bench.types import BenchPlan
from autotune.core.errors import AutotuneError, NodeLostError, ReplicaError
from autotune.trial import slots
from autotune.trial.replica import BenchRun, Deployed, DeployRequest, Failure, Ready, ServerReport, Teardown

T = TypeVar("T")


def _ray_error_types() -> tuple[type[BaseException], ...]:
    """What Ray raises across a deployment handle or ``serve.run``: its errors (an actor died, a get timed out, a
    replica method raised: ``RayTaskError``), Serve's, a plain ``TimeoutError``, and the ``RuntimeError`` that
    ``serve.run`` raises when an application fails to deploy."""
    from ray.exceptions import RayError
    from ray.serve.exceptions import RayServeException

    return (RayError, RayServeException, TimeoutError, RuntimeError)


@contextmanager
def ray_errors(what: str) -> Iterator[None]:
    """Translate Ray's exceptions raised inside the block into ``ReplicaError`` naming ``what`` was being done."""
    try:
        yield
    except AutotuneError:
        raise
    except _ray_error_types() as exc:
        raise ReplicaError(f"{what}: {type(exc).__name__}: {exc}") from exc


def _tell(ref: Any) -> None:
    """Wait for a call to the slot pool (up to 30 s); where it fails, the node event lists the slot without the trial
    and the retry still runs."""
    import ray

    try:
        ray.get(ref, timeout=30)
    except Exception:  # noqa: BLE001
        pass


class ServeReplica:
    """A ``Replica`` behind a Serve deployment handle; every call waits at most its timeout."""

    def __init__(
        self,
        handle: Any,
        *,
        ready_wait_s: float,
        bench_wait_s: float,
        info_wait_s: float = 120.0,
        stop_wait_s: float = 180.0,
        nodes: tuple[str, ...] = (),
        check_s: float = 5.0,
    ) -> None:
        self.handle = handle
        self.nodes = nodes  # the slot's node(s): a call on a replica whose node is gone fails instead of waiting
        self.check_s = check_s
        self.ready_wait_s = ready_wait_s
        self.bench_wait_s = bench_wait_s
        self.info_wait_s = info_wait_s
        self.stop_wait_s = stop_wait_s

    def _call(self, method: str, wait_s: float, *args: Any, **kwargs: Any) -> Any:
        with ray_errors(f"the replica's {method} call failed"):
            response = getattr(self.handle, method).remote(*args, **kwargs)
            if not self.nodes:
                return response.result(timeout_s=wait_s)
            # a request in flight on a replica whose node was lost may never be answered: wait in slices and ask Ray
            # between them whether the slot's nodes are alive
            deadline = time.monotonic() + wait_s
            while True:
                left = deadline - time.monotonic()
                try:
                    return response.result(timeout_s=max(0.1, min(self.check_s, left)))
                except TimeoutError:
                    if left <= self.check_s:
                        raise
                    lost = slots.node_lost(self.nodes, wait_s=0.0)
                    if lost:
                        raise ReplicaError(f"the replica's {method} call failed: {lost}") from None

    def wait_ready(self, expected: str | None = None) -> Ready | Failure:
        return self._call("wait_ready", self.ready_wait_s, expected)

    def benchmark(self, plan: BenchPlan) -> BenchRun:
        return self._call("benchmark", self.bench_wait_s, plan)

    def info(self) -> ServerReport:
        return self._call("info", self.info_wait_s)

    def stop_server(self, *, defer: bool = False) -> Teardown:
        return self._call("stop_server", self.stop_wait_s, defer=defer)


class ServeDeployer:
    """Deploys a trial's server with ``serve.run``: onto a free GPU slot of the study (the slot's replica is updated
    in place through ``user_config``), or, where the study has no slot pool (a trial run outside the driver), as an
    application of its own that ``release`` deletes."""

    def __init__(
        self,
        *,
        ready_wait_s: float,
        bench_wait_s: float,
        acquire: Callable[..., int] = slots.acquire,
        check_s: float = 5.0,
    ) -> None:
        self.check_s = check_s  # how often a deploy onto a pinned slot asks Ray whether the slot's nodes are alive
        self.ready_wait_s = ready_wait_s
        self.bench_wait_s = bench_wait_s
        self.acquire = acquire
        self._pools: dict[str, Any] = {}
        self._nodes: dict[str, tuple[str, ...]] = {}  # slot app -> the node(s) its placement group is pinned to

    def deploy(self, request: DeployRequest) -> Deployed:

        from autotune.serve.app import EngineArgs, build_app, build_slot_app

        launch = request.launch
        pool = slots.find(request.owner)
        try:
            slot = self.acquire(pool, number=request.number) if pool is not None else None
            where = slots.describe(pool, slot) if slot is not None else None
            n_slots = slots.size(pool) if pool is not None else None
        except AutotuneError as exc:
            raise ReplicaError(f"{request.name} got no GPU slot: {exc}") from exc
        local = slot
        if where is not None and where.nodes:  # the slot's CPU share is among its node's slots
            local, n_slots = where.local, where.node_slots
        nodes = where.nodes if where is not None else ()
        args = EngineArgs(
            name=request.name,
            engine=launch.engine,
            argv=list(launch.argv),
            env=dict(launch.env),
            unset_env=list(launch.unset_env),
            host=launch.host,
            port=0,
            gpus=launch.gpus,
            nnodes=launch.nnodes,
            ready_timeout_s=launch.ready_timeout_s,
            owner=request.owner,
            trial_number=request.number,
            trial_id=request.trial_id,
            slot=local,
            slots=n_slots,
            cpu_isolation=request.cpu_isolation,
        ).model_dump()
        # a slot comes only from the pool that `request.owner` names
        app_name = slots.slot_app_name(request.study, request.owner or "", slot) if slot is not None else request.name
        app = build_slot_app(args, nodes) if slot is not None else build_app(args)
        t0, epoch = time.monotonic(), time.time()
        try:
            with ray_errors(f"Ray Serve could not deploy {app_name}"):
                handle = self._serve_run(app, app_name, nodes if pool is not None else ())
        except ReplicaError as exc:
            lost = slots.node_lost(nodes) if pool is not None else ""
            if pool is not None:
                if lost:
                    _tell(pool.interrupted.remote(slot))
                pool.release.remote(slot)
            if lost:
                raise NodeLostError(
                    f"{request.name}: {lost} while it deployed; it is retried on another GPU slot"
                ) from exc
            raise
        if pool is not None:
            self._pools[app_name] = (pool, slot)
            self._nodes[app_name] = nodes
        replica = ServeReplica(
            handle, ready_wait_s=self.ready_wait_s, bench_wait_s=self.bench_wait_s, nodes=nodes if pool else ()
        )
        return Deployed(replica=replica, app=app_name, serve_run_s=time.monotonic() - t0, deploy_epoch=epoch)

    def _serve_run(self, app: Any, app_name: str, nodes: tuple[str, ...]) -> Any:
        """``serve.run``, which waits until the application runs. On a slot pinned to ``nodes`` it runs in a thread
        and Ray is asked every few seconds whether those nodes are alive: a replica whose node was lost never becomes
        healthy, and its application is deleted so that the waiting call ends (``ReplicaError``)."""
        from ray import serve

        def run() -> Any:
            return serve.run(app, name=app_name, route_prefix=f"/{app_name}")

        if not nodes:
            return run()
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["handle"] = run()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"serve-run-{app_name}", daemon=True)
        thread.start()
        while True:
            thread.join(self.check_s)
            if not thread.is_alive():
                if "error" in box:
                    raise box["error"]
                return box["handle"]
            lost = slots.node_lost(nodes, wait_s=0.0)
            if lost:
                serve.delete(app_name, _blocking=False)  # the waiting serve.run then ends
                raise ReplicaError(f"Ray Serve could not deploy {app_name}: {lost}")

    def node_lost(self, deployed: Deployed) -> str:
        """Why a node of ``deployed``'s GPU slot is gone (a sentence), or "" where all are alive (or the slot is not
        pinned to nodes). Told to the pool before the slot is released, so the driver's node event names the trial."""
        reason = slots.node_lost(self._nodes.get(deployed.app, ()))
        held = self._pools.get(deployed.app)
        if reason and held is not None:
            _tell(held[0].interrupted.remote(held[1]))
        return reason

    def release(self, deployed: Deployed) -> str:
        from ray import serve

        held = self._pools.pop(deployed.app, None)
        self._nodes.pop(deployed.app, None)
        if held is not None:
            pool, slot = held
            pool.release.remote(slot)
            return ""
        try:
            with ray_errors(f"serve.delete({deployed.app}) failed"):
                serve.delete(deployed.app, _blocking=False)
        except ReplicaError as exc:
            return str(exc)
        return ""
