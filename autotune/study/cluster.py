"""The study's Ray cluster: a local one of its own (loopback only, with its dashboard), or a running one it joins
(``--address`` / ``RAY_ADDRESS``, checked reachable first), and the small guards around starting and stopping it."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.core import gpus
from autotune.core.errors import AutotuneError
from autotune.space import StudySpec


@dataclass(frozen=True)
class ClusterRequest:
    """Where the study runs: ``address`` to join (None: ``RAY_ADDRESS``, else a local cluster), and the local one's
    GPUs (None: detected), dashboard port and Prometheus metrics port (None: Ray picks one)."""

    address: str | None
    num_gpus: int | None
    dashboard_port: int
    metrics_port: int | None
    verbose: bool  # Ray's own output on the console


PROXY_READY_S = 30  # how long Ray Serve waits for a local cluster's HTTP proxy to become ready
SERVE_START_ATTEMPTS = 3


def start_serve(port: int, attempts: int = SERVE_START_ATTEMPTS) -> None:
    """Start Ray Serve with its HTTP proxy on 127.0.0.1:``port``. A proxy that dies before it is ready (a loaded node)
    is restarted by Serve's controller with a longer ready check, so the start is tried again; after ``attempts``
    an AutotuneError says what happened."""
    import ray
    from ray import serve

    last: Exception | None = None
    for _ in range(attempts):
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            return
        except (ray.exceptions.RayActorError, TimeoutError) as exc:  # ActorDiedError is a RayActorError
            last = exc
    first = str(last).strip().splitlines()[0] if last is not None and str(last).strip() else type(last).__name__
    raise AutotuneError(
        f"Ray Serve's HTTP proxy did not start on 127.0.0.1:{port} ({attempts} attempts; last: {first}). On a "
        f"loaded machine the proxy can take longer than Serve waits for it: free some CPU, or set "
        f"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S higher (seconds; autotune sets {PROXY_READY_S} for a local cluster), "
        f"and run the same command again: finished trials are kept."
    ) from last


def sim_profile_gpus(name: str) -> int | None:
    """The GPUs a simulator profile declares; None for a profile that cannot be read."""
    try:
        from autotune.sim.profile import load_profile

        return int(load_profile(name).gpu_count)
    except Exception:  # noqa: BLE001 - the engine reports a bad profile with its own message at launch
        return None


def start_ray(spec: StudySpec, req: ClusterRequest, say: Callable[[str], None]) -> tuple[bool, float]:
    """Start or join the study's Ray cluster; returns whether this process started it, and the cluster's GPUs."""
    import ray

    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    # Ray Serve kills an HTTP proxy not ready within 5 s of its start; on a loaded node (every core busy) importing
    # Serve in the proxy's worker takes longer, and serve.start then fails with the proxy "killed by ray.kill". A local
    # cluster inherits this; a joined one keeps its own setting.
    os.environ.setdefault("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", str(PROXY_READY_S))
    address = req.address or os.environ.get("RAY_ADDRESS")
    if address:
        where = "--address" if req.address else "RAY_ADDRESS"
        check_reachable(address, where)  # ray.init retries an unreachable GCS for minutes
        try:
            ctx = ray.init(address=address, log_to_driver=req.verbose)
        except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
            raise AutotuneError(
                f"could not connect to the Ray cluster at {address!r} (from {where}): "
                f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}. Start it (`ray start --head`), "
                f"fix the address, or drop {where} to run a local Ray here."
            ) from exc
        started = False
    else:
        kwargs: dict[str, Any] = {}
        num_gpus = req.num_gpus
        if num_gpus is None and spec.engine == "sim" and gpus.count() == 0:
            num_gpus = max(sim_profile_gpus(spec.sim.profile) or 0, spec.gpus_per_trial)  # type: ignore[union-attr]
            say(f"no GPU here: the local Ray node declares {num_gpus} simulated GPU(s) for the simulator")
        if num_gpus is not None:
            kwargs["num_gpus"] = num_gpus
        if req.metrics_port:
            kwargs["_metrics_export_port"] = req.metrics_port
        if port_busy(req.dashboard_port):
            raise AutotuneError(
                f"port {req.dashboard_port} on 127.0.0.1 is in use (another Ray dashboard?), so this study's "
                f"dashboard cannot start there; pass --dashboard-port with a free port, or join that cluster with "
                f"--address auto."
            )
        # address="local": always a cluster of its own, never a stray one found on the machine. It stays on this
        # machine: with Ray's cluster mode off (the switch Ray itself uses on macOS/Windows) the node's address is
        # 127.0.0.1 and the GCS, raylet and workers listen there only, not on every interface; the dashboard
        # binds 127.0.0.1 too. Joining a cluster (--address) is unaffected.
        loopback_only_ray()
        ctx = ray.init(address="local", num_cpus=max(4, os.cpu_count() or 1), include_dashboard=True,
                       dashboard_host="127.0.0.1", dashboard_port=req.dashboard_port,
                       log_to_driver=req.verbose, _node_ip_address="127.0.0.1", **kwargs)
        started = True
    url = getattr(ctx, "dashboard_url", None)
    say(f"Ray dashboard: http://{url}" if url else "Ray dashboard: not available on this cluster")
    if started and req.metrics_port:
        say(f"study metrics (Prometheus): http://127.0.0.1:{req.metrics_port}/metrics")
    total = float(ray.cluster_resources().get("GPU", 0))
    return started, total


def check_reachable(address: str, where: str, timeout_s: float = 5.0) -> None:
    """Raise AutotuneError at once when ``host:port`` (or ``ray://host:port``) does not accept a TCP connection."""
    import socket

    if address == "auto":
        from ray._private.services import canonicalize_bootstrap_address

        try:
            found = canonicalize_bootstrap_address("auto")
        except (ConnectionError, ValueError) as exc:
            found, why = None, str(exc).splitlines()[0]
        else:
            why = "no running Ray cluster was found on this machine"
        if not found:
            raise AutotuneError(f"--address auto: {why}. Start one (`ray start --head`), or drop --address to run a "
                                f"local Ray here.")
        address = found
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout_s):
            return
    except (OSError, ValueError) as exc:
        raise AutotuneError(
            f"could not connect to the Ray cluster at {address!r} (from {where}): {exc}. Start it (`ray start "
            f"--head`), fix the address, or drop {where} (unset RAY_ADDRESS) to run a local Ray here."
        ) from exc


def loopback_only_ray() -> None:
    from ray._private import ray_constants

    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # for Ray's child processes
    ray_constants.ENABLE_RAY_CLUSTER = False  # read by services.get_node_ip_address in this process


def ignore_sigint() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def bounded(fn: Any, timeout_s: float) -> None:
    """Call ``fn`` in a daemon thread and wait at most ``timeout_s`` (a Ray call on a dead cluster can block)."""
    import threading

    t = threading.Thread(target=fn, daemon=True)
    t.start()
    t.join(timeout_s)


def port_busy(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
