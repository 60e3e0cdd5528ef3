"""What an ``EngineServer`` replica is given and how it prepares a launch: ``EngineArgs`` (a Serve config's
``args:``), the argv with this replica's interpreter and a free port, the wait for its GPUs to read free, and a launch
error as the ``Failure`` the runner records."""

from __future__ import annotations

import socket
import sys

from pydantic import BaseModel, ConfigDict, Field

from autotune.core.errors import AutotuneError, LaunchError, failure_kind, rejected_flags
from autotune.core.failures import FailureKind
from autotune.trial.launcher import wait_gpus_free
from autotune.trial.replica import Failure


class EngineArgs(BaseModel):
    """The application's arguments (``args:`` in a Serve config file)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="application / server name, used for the log file")
    engine: str = Field(description="'sglang' or 'sim'")
    argv: list[str] = Field(
        description="exact server argv; '--port 0' means: pick a free port on the replica's node; "
        "an argv that starts with '-m' runs on the replica's own Python interpreter"
    )
    env: dict[str, str] = Field(default_factory=dict, description="variables set for the server")
    unset_env: list[str] = Field(default_factory=list, description="inherited variables removed (e.g. OMP_NUM_THREADS)")
    host: str = "127.0.0.1"
    port: int = 0
    gpus: int = 1
    nnodes: int = Field(default=1, description="nodes the server spans (SGLang --nnodes); gpus counts all of them")
    ready_timeout_s: float = 900.0
    log_dir: str | None = None
    wait_ready_in_constructor: bool = False
    health_follows_engine: bool = Field(
        default=False,
        description="production: the replica is unhealthy whenever its engine is gone or failed, so "
        "Serve replaces it (a study's replicas report a failed launch to the runner instead)",
    )
    check_flags: bool = True
    owner: str | None = Field(
        default=None, description="study that owns the server (orphan sweep after a killed driver)"
    )
    trial_number: int | None = Field(default=None, description="the Optuna trial number (progress events)")
    trial_id: str | None = Field(default=None, description="the Ray Tune trial id (progress events)")
    slot: int | None = Field(default=None, description="the study's GPU slot this replica is (its share of the CPUs)")
    slots: int | None = Field(default=None, description="how many GPU slots the study has")
    cpu_isolation: bool = Field(
        default=True,
        description="pin the server and the benchmark client to this slot's "
        "CPU set (autotune.core.cpusets); a slot alone on its node gets every CPU",
    )


def failure_of(exc: AutotuneError) -> Failure:
    return Failure(failure_kind(exc), str(exc), getattr(exc, "log_tail", ""), rejected_flags(exc))


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def with_interpreter(argv: list[str]) -> list[str]:
    """``["-m", module, ...]`` (an exported config) runs on this replica's interpreter; other argvs are kept."""
    return [sys.executable, *argv] if argv[:1] == ["-m"] else list(argv)


def with_port(argv: list[str], flag: str, port: int) -> list[str]:
    out = list(argv)
    if flag in out:
        out[out.index(flag) + 1] = str(port)
    return out


GPU_WAIT_TIMEOUT_S = 60.0


def wait_gpus_before_launch(gpu_ids: list[str]) -> float | None:
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
