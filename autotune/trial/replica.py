"""What crosses the Ray Serve boundary between a trial's runner and the replica that runs its engine server.

The runner (``autotune.study.runner``) talks to a replica only through the ``Replica`` protocol; the Serve deployment
(``autotune.serve.app.EngineServer``) implements it, and ``autotune.serve.handle.ServeReplica`` adapts a deployment
handle to it. Every answer is a frozen record below: Ray pickles them as they are, so the runner reads typed fields,
never string keys. A test replaces the replica with any object of the same shape (``tests/study/test_runner.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from autotune.bench.types import BenchPlan, BenchResult
from autotune.core.failures import FailureKind
from autotune.core.trial import LaunchSpec

LOG_KEEP = 200_000  # characters of a server log that cross the boundary and are kept with the record


def clip_log(text: str, keep: int = LOG_KEEP) -> str:
    """A server log cut to about ``keep`` characters: its first half (the launch: weights, the KV cache allocated,
    CUDA graphs, which the record's phases are parsed from) and its last half (the end of the benchmark, the error of a
    crash), with a line saying how much was left out between them. A shorter log is returned whole."""
    if len(text) <= keep:
        return text
    head, tail = text[: keep // 2], text[-(keep // 2) :]
    head = head[: head.rfind("\n") + 1] or head  # whole lines where there are any
    cut = tail.find("\n")
    tail = tail[cut + 1 :] if 0 <= cut < len(tail) - 1 else tail
    return f"{head}[... {len(text) - len(head) - len(tail):,} characters of the log left out ...]\n{tail}"


@dataclass(frozen=True)
class Ready:
    """The engine server answers its health check; ``ready_s``: process start -> ready."""

    ready_s: float


@dataclass(frozen=True)
class Failure:
    """The server could not be started or became unusable. ``flags``: the flags the engine refused, if any."""

    kind: FailureKind
    message: str
    log_tail: str = ""
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchRun:
    """One benchmark against the replica's server. ``alive``: whether the server still ran when it ended."""

    ok: bool
    alive: bool
    bench_s: float
    result: BenchResult | None = None
    message: str = ""  # why the benchmark could not finish (``ok`` False)
    log_tail: str = ""  # the server log's tail when it did not


@dataclass(frozen=True)
class ServerReport:
    """Everything the trial's record needs about the replica and its server (``Replica.info``)."""

    argv: tuple[str, ...] = ()  # as launched: the picked port in it, release aliases applied
    env: Mapping[str, str] = field(default_factory=dict)
    unset_env: tuple[str, ...] = ()
    node: str | None = None
    gpu_ids: tuple[str, ...] = ()
    gpu_names: tuple[str, ...] = ()
    release: str | None = None  # the installed engine release, e.g. "sglang 0.5.17"
    server_info: Mapping[str, Any] | None = None  # the server's /server_info answer
    log_text: str = ""  # the server log, ``clip_log``-ped: its launch (head) and its end
    ready_s: float | None = None
    init_epoch: float | None = None  # time.time() when the replica began the launch
    preflight_s: float | None = None
    gpu_wait_s: float | None = None
    replica_pid: int | None = None
    launches: int = 0  # engines this replica has started, this one included
    orphans_killed: int = 0  # servers a dead replica of the same study left, killed before this launch
    omp_num_threads_in_replica: str | None = None  # Ray's OMP_NUM_THREADS in the replica (removed for the server)
    cpus: str | None = None  # the CPU list the server and the benchmark client run on (autotune.core.cpusets)
    cpu_isolation: str | None = None  # how it was chosen, e.g. "disjoint: part 2 of 2 on NUMA node(s) 1"


@dataclass(frozen=True)
class Teardown:
    """How the server was stopped. ``deferred``: SIGKILL sent, the exit reaped in the background."""

    teardown_s: float = 0.0
    gpu_free_s: float | None = None
    error: str = ""
    deferred: bool = False
    gpu_mem_mib: Mapping[str, int] | None = None


class Replica(Protocol):
    """A Serve replica that runs one engine server at a time."""

    def wait_ready(self, expected: str | None = None) -> Ready | Failure:
        """Block until the server named ``expected`` answers, or say why it will not."""

    def benchmark(self, plan: BenchPlan) -> BenchRun:
        """Run ``plan`` against the server from the replica's node."""

    def info(self) -> ServerReport:
        """The server's argv, environment, node, GPUs, release and log."""

    def stop_server(self, *, defer: bool = False) -> Teardown:
        """Stop the server's process group (``defer``: SIGKILL and return)."""


@dataclass(frozen=True)
class DeployRequest:
    """What the runner asks a deployer for: one trial's server, under the Serve application name ``name``."""

    name: str
    study: str
    launch: LaunchSpec
    owner: str | None = None  # the study's owner tag (its GPU slot pool, its progress monitor, the orphan sweep)
    number: int | None = None  # the Optuna trial number and Ray Tune trial id (the replica's progress events)
    trial_id: str | None = None
    cpu_isolation: bool = True  # give the slot's server and client a CPU set of their own (study.cpu_isolation)


@dataclass(frozen=True)
class Deployed:
    """A replica running (or failing to run) the trial's server, as a deployer hands it to the runner."""

    replica: Replica
    app: str  # the Serve application that holds it (a study's GPU slot, or the trial's own)
    serve_run_s: float  # how long the deploy call took
    deploy_epoch: float  # time.time() when the deploy began (replica_start_s = init_epoch - this)


class Deployer(Protocol):
    """Puts a trial's server on a replica (raises ``ReplicaError`` when it cannot) and takes it away afterwards."""

    def deploy(self, request: DeployRequest) -> Deployed:
        """Deploy the server; raise ``autotune.core.errors.ReplicaError`` when Serve cannot."""

    def release(self, deployed: Deployed) -> str:
        """Give the replica back (delete the trial's own application, or free the GPU slot); an error text or ""."""
