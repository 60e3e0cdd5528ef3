"""The study's Ray cluster: a local one of its own (loopback only, with its dashboard), or a running one it joins
(``--address`` / ``RAY_ADDRESS``, checked reachable first), and the small guards around starting and stopping it."""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.core import gpus
from autotune.core.errors import AutotuneError
from autotune.space import StudySpec

if TYPE_CHECKING:
    from autotune.trial.slots import Slot


@dataclass(frozen=True)
class ClusterRequest:
    """Where the study runs: ``address`` to join (None: ``RAY_ADDRESS``, else a local cluster), and the local one's
    GPUs (None: detected), dashboard port and Prometheus metrics port (None: Ray picks one)."""

    address: str | None
    num_gpus: int | None
    dashboard_port: int
    metrics_port: int | None
    verbose: bool  # Ray's own output on the console
    state_dir: Path | None = None  # the study's directory: where the local cluster's session is noted (SESSION_FILE)


PROXY_READY_S = 30  # how long Ray Serve waits for a local cluster's HTTP proxy to become ready
# Ray CPUs one GPU slot holds while its trial runs: the slot's replica (1 on each of its nodes, ``autotune.serve.app``)
# and the trial function (0.5, the driver's Tune resources; a finalist relaunch task takes as much)
REPLICA_CPUS = 1.0
TRIAL_CPUS = 0.5
CPUS_PER_SLOT = REPLICA_CPUS + TRIAL_CPUS


def local_cpus(num_gpus: float, gpus_per_trial: int) -> int:
    """The CPUs a local cluster declares: the machine's (at least 4), and at least what every GPU slot it can hold
    needs at once; fewer, and the slots past them never got a replica (their trials waited at "launching" forever)."""
    slots = int(num_gpus // max(1, gpus_per_trial))
    return max(4, os.cpu_count() or 1, math.ceil(slots * CPUS_PER_SLOT))


def cpu_shortfall(plan: list[Slot], cpus: Mapping[str, float], home: str | None) -> str:
    """Why the Ray nodes' CPUs (``cpus``, by node id) cannot hold the slots of ``plan`` all running at once, or ``""``:
    each slot's replica takes ``REPLICA_CPUS`` on each of its nodes and each trial function ``TRIAL_CPUS`` on the
    driver's node ``home`` (anywhere where None). Ray would never place a replica that does not fit beside the trial
    functions holding its node's CPUs, and the trials would wait at "launching" until their deploy timed out. A
    driver's node that holds no replica (a CPU-only head) needs room for one trial function: Tune runs the others as
    CPUs free up. Says the largest ``--max-concurrent`` that fits, if one does."""

    def short(k: int) -> str:
        need: dict[str, float] = {}
        for node in [n for sl in plan[:k] for n in sl.nodes]:
            need[node] = need.get(node, 0.0) + REPLICA_CPUS
        trials = TRIAL_CPUS * k
        if home is None:  # the trial functions go wherever there is a CPU
            total = sum(need.values()) + trials
            if total > sum(cpus.values()):
                return f"the cluster has {sum(cpus.values()):g} CPU(s) and {k} trial(s) at once need {total:g}"
        else:
            need[home] = need.get(home, 0.0) + (trials if home in need else TRIAL_CPUS)
        for node, n in need.items():
            if n > cpus.get(node, 0.0):
                return f"node {node[:8]} has {cpus.get(node, 0.0):g} CPU(s) and {k} trial(s) at once need {n:g} there"
        return ""

    why = short(len(plan))
    if not why:
        return ""
    fits = next((k for k in range(len(plan) - 1, 0, -1) if not short(k)), 0)
    fix = f"pass --max-concurrent {fits}, or give" if fits else "give"
    return (
        f"the Ray cluster's CPUs cannot hold {len(plan)} trial(s) at once: {why} ({REPLICA_CPUS:g} for each GPU "
        f"slot's replica on its node, {TRIAL_CPUS:g} for each trial's function on the driver's node). Ray would never "
        f"place the rest, and their trials would wait at launching until they failed: {fix} the nodes more CPUs "
        f"(ray start --num-cpus N)."
    )


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
            # one proxy, on the head: the study calls its replicas through handles, and a proxy per node would bind
            # the same 127.0.0.1 port once per node where several nodes share a machine
            serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
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


def stop_serve(study: str, owner: str, *, own_cluster: bool) -> None:
    """Serve's end for a study: on the study's own cluster Serve goes whole; on a joined one only the study's slot
    applications are deleted (waiting until they are gone, so their engines stop before the sweep), and the cluster's
    other applications (another study's, a service in production) keep running."""
    from ray import serve

    from autotune.trial.slots import slot_app_name

    if own_cluster:
        serve.shutdown()
        return
    prefix = slot_app_name(study, owner, 0).removesuffix("0")  # <study>-<id>-slot-<k>
    for name in list(serve.status().applications):
        if name.startswith(prefix) and name[len(prefix) :].isdigit():
            serve.delete(name)


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
        if address.split("://", 1)[-1].rpartition(":")[0] in ("127.0.0.1", "localhost"):
            # a cluster on this machine's loopback (several nodes on one machine): join it there too; otherwise Ray
            # rewrites 127.0.0.1 to the host's own address, where nothing listens
            loopback_only_ray()
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
            from autotune.sim.profile import profile_gpus

            num_gpus = max(profile_gpus(spec.sim.profile) or 0, spec.gpus_per_trial)  # type: ignore[union-attr]  # spec.engine == 'sim' here, and a sim study always has its sim section (space.checks)
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
        try:
            ctx = ray.init(
                address="local",
                num_cpus=local_cpus(num_gpus if num_gpus is not None else gpus.count(), spec.gpus_per_trial),
                include_dashboard=True,
                dashboard_host="127.0.0.1",
                dashboard_port=req.dashboard_port,
                log_to_driver=req.verbose,
                _node_ip_address="127.0.0.1",
                **kwargs,
            )
        except Exception as exc:  # noqa: BLE001 - Ray's start-up failures have no common type
            if isinstance(exc, AutotuneError):
                raise
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise AutotuneError(
                f"the study's local Ray cluster did not start ({type(exc).__name__}: {first[:300]}). A port it needs "
                f"may be taken, or the machine too loaded to start it in time: see /tmp/ray/session_latest/logs, free "
                f"some CPU or pass --dashboard-port/--metrics-port with free ports, and run the same command again "
                f"(finished trials are kept)."
            ) from exc
        started = True
        if req.state_dir is not None:
            node = getattr(ray._private.worker, "_global_node", None)
            if node is not None:
                record_session(req.state_dir, node.get_session_dir_path())
    url = getattr(ctx, "dashboard_url", None)
    say(f"Ray dashboard: http://{url}" if url else "Ray dashboard: not available on this cluster")
    if started and req.metrics_port:
        say(f"study metrics (Prometheus): http://127.0.0.1:{req.metrics_port}/metrics")
    total = float(ray.cluster_resources().get("GPU", 0))
    return started, total


SESSION_FILE = "ray-session.json"  # results/<study>/: the session of the local cluster the study's driver started
STOP_WAIT_S = 10.0


def record_session(state_dir: Path, session_dir: str) -> None:
    """Note the session of the local cluster this driver started, so a run after a killed driver can find the
    processes that cluster left running (by session, never by name)."""
    from autotune.trial.store import atomic_write_text

    atomic_write_text(
        Path(state_dir) / SESSION_FILE, json.dumps({"session_dir": str(session_dir), "driver_pid": os.getpid()})
    )


def _proc_title(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


def _in_session(pid: int, session_dir: str) -> bool:
    """Whether process ``pid`` belongs to the Ray session ``session_dir``: its command line names the session, or a
    file it holds open lies in the session's folder (Ray's agents retitle themselves ``ray::DashboardAgent`` but keep
    their logs open there)."""
    name = os.path.basename(session_dir.rstrip("/"))
    if name and name in _proc_title(pid):
        return True
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    prefix = session_dir.rstrip("/") + "/"
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                return True
        except OSError:
            continue
    return False


def session_processes(session_dir: str) -> list[int]:
    """This user's processes of the Ray session ``session_dir`` (none of another user's, never this process)."""
    uid, me = os.getuid(), os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if os.stat(f"/proc/{entry}").st_uid != uid:
                continue
        except OSError:
            continue
        if _in_session(int(entry), session_dir):
            found.append(int(entry))
    return sorted(found)


def stop_orphans(state_dir: Path, say: Callable[[str], None]) -> list[int]:
    """Stop the processes of the local Ray cluster an earlier driver of this study started and left running (it was
    killed, or its GCS was lost): they hold that cluster's ports (the dashboard agent's, the metrics port) and the
    next cluster would fail to start. Only processes of that cluster's session are touched; says what it did.
    The caller holds the study's lock, so the driver that started that cluster is gone."""
    path = Path(state_dir) / SESSION_FILE
    try:
        info = json.loads(path.read_text())
        session_dir = str(info["session_dir"])
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if int(info.get("driver_pid") or 0) == os.getpid():
        return []  # this driver's own cluster
    pids = session_processes(session_dir)
    if not pids:
        return []
    titles = {pid: _proc_title(pid).split(" ")[0].rsplit("/", 1)[-1] or "?" for pid in pids}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + STOP_WAIT_S
    left = pids
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = [pid for pid in left if _alive(pid)]
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    listed = ", ".join(f"{titles[p]} (pid {p})" for p in pids)
    say(
        f"stopped {len(pids)} process(es) of this study's previous Ray cluster ({os.path.basename(session_dir)}), "
        f"left running by a driver that was killed or lost its cluster: {listed}"
        f"{' (SIGKILL after ' + format(STOP_WAIT_S, 'g') + ' s)' if left else ''}; the ports they held are free again"
    )
    return pids


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"  # a zombie holds no port


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
            raise AutotuneError(
                f"--address auto: {why}. Start one (`ray start --head`), or drop --address to run a local Ray here."
            )
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


def main(argv: list[str] | None = None) -> int:
    """``python -m autotune.study.cluster --stop-orphans results/<study>``: stop what the study's last local Ray cluster left
    running (for scripts that end a study from outside, instead of Ray's own stop command, which stops every Ray on the
    machine). Refused while a driver holds the study's lock, so a running study is never touched."""
    import argparse
    import sys

    from autotune.study.studylock import StudyLock

    p = argparse.ArgumentParser(prog="python -m autotune.study.cluster", description=main.__doc__)
    p.add_argument("--stop-orphans", type=Path, required=True, metavar="STUDY_DIR")
    args = p.parse_args(argv)
    try:
        with StudyLock(args.stop_orphans):
            stopped = stop_orphans(args.stop_orphans, print)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not stopped:
        print(f"no process of {args.stop_orphans}'s Ray cluster is left running")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
