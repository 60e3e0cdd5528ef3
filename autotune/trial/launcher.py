"""Start an engine server process, wait until it is ready, and tear its whole process tree down.

The server runs in its own process session (so one signal reaches every rank and helper process), its output goes to
a log file, and readiness polls ``/health`` while also polling the process for exit: a crash is reported at once with
its log tail, not after the timeout.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from autotune.core import gpus
from autotune.core.errors import LaunchError
from autotune.core.failures import FailureKind
from autotune.core.site import server_environment
from autotune.core.trial import LaunchSpec
from autotune.engines.base import classify_failure, key_error_line, rejected_flags_in_log
from autotune.trial import registry

POLL_S = 0.1
RANK_CHECK_S = 2.0  # how often a multi-node server's wait asks whether its other node ranks still run


def exited_before_ready(who: str, tail: str) -> LaunchError:
    """The launch failure of a server process (``who``: "server exited with code 1") that exited before it was
    ready, classified from its log ``tail``."""
    kind = classify_failure(tail, ready=False)
    return LaunchError(
        kind,
        f"{who} before it was ready ({kind.value}): {key_error_line(tail)}",
        tail,
        flags=rejected_flags_in_log(tail),
    )


def read_tail(path: Path, max_bytes: int = 12_000, max_lines: int = 60, start: int = 0) -> str:
    """The last lines of ``path``, none before byte ``start``."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(start, size - max_bytes))
            data = fh.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-max_lines:])


def build_env(spec: LaunchSpec, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: the parent's minus ``unset_env``, plus ``spec.env``; the site's variables found in the
    parent (``autotune.core.site``) are re-applied last, so no spec can drop or change them."""
    env = server_environment(os.environ if base is None else base, unset=spec.unset_env, env=spec.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass
class ServerProcess:
    """One engine server. Owns the process group from ``start`` to ``stop``."""

    spec: LaunchSpec
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    ready_at: float | None = None
    owner: str | None = None  # the study that owns the server, for the orphan sweep (autotune.trial.registry)
    log_start: int = 0  # where this launch's output begins in the log file (a relaunch under one name appends)

    @property
    def base_url(self) -> str:
        return self.spec.base_url

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.log_start = log.tell()
        try:
            self.started_at = time.monotonic()
            self.proc = subprocess.Popen(  # noqa: S603 - argv built by the engine adapter
                list(self.spec.argv),
                env=build_env(self.spec),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(FailureKind.CRASHED_AT_LAUNCH, f"could not start {self.spec.argv[0]}: {exc}") from exc
        finally:
            log.close()
        if self.owner:
            registry.register(self.proc.pid, self.owner, list(self.spec.argv))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, max_lines: int = 60) -> str:
        return read_tail(self.log_path, max_lines=max_lines, start=self.log_start)

    def log_text(self) -> str:
        """This launch's whole output."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self.log_start)
                return fh.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def wait_ready(
        self, timeout_s: float | None = None, peers: Callable[[], LaunchError | None] | None = None
    ) -> float:
        """Block until ``/health`` answers 200. Returns seconds from start to ready. Raises LaunchError.

        ``peers``: asked every ``RANK_CHECK_S`` why the server's other processes (a multi-node server's node ranks) are
        gone, if they are: the server is then stopped and that error raised, not waited out to the timeout."""
        if self.proc is None:
            raise LaunchError(FailureKind.CRASHED_AT_LAUNCH, "server was never started")
        deadline = self.started_at + (timeout_s if timeout_s is not None else self.spec.ready_timeout_s)
        asked = time.monotonic()
        with httpx.Client(timeout=5.0, trust_env=False) as client:
            while True:
                if peers is not None and time.monotonic() - asked >= RANK_CHECK_S:
                    asked = time.monotonic()
                    error = peers()
                    if error is not None:
                        self.stop()
                        raise error
                code = self.proc.poll()
                if code is not None:
                    raise exited_before_ready(f"server exited with code {code}", self.log_tail())
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        self.ready_at = time.monotonic()
                        return self.ready_at - self.started_at
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    tail = self.log_tail()
                    self.stop()
                    raise LaunchError(
                        FailureKind.HEALTH_TIMEOUT,
                        f"server did not answer /health with 200 within {deadline - self.started_at:.0f} s; it was "
                        f"killed. Raise study.ready_timeout_s if launches are just slow (large weights, graph capture).",
                        tail,
                    )
                time.sleep(POLL_S)

    def kill(self) -> None:
        """SIGKILL the whole process group and return at once; ``stop`` afterwards reaps it and checks it is gone.

        For a disposable server whose exit (CUDA contexts torn down, 1-2 s on an H200) can overlap other work: the next
        launch on the same GPUs waits for their memory to read free (``wait_gpus_free``) before it starts.
        """
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self, grace_s: float = 5.0) -> float:
        """SIGTERM the leader, wait ``grace_s``, SIGKILL the whole group, wait until it is gone. Returns seconds."""
        if self.proc is None:
            return 0.0
        t0 = time.monotonic()
        pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        if self.proc.poll() is None and grace_s > 0:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        _wait_group_gone(pgid, timeout_s=30)
        registry.unregister(pgid)
        return time.monotonic() - t0


def _wait_group_gone(pgid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not registry.group_alive(pgid):
            return True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        time.sleep(0.1)
    return False


def wait_gpus_free(ids: list[str] | None = None, *, threshold_mib: int = 1024, timeout_s: float = 60.0) -> float | None:
    """Seconds until the GPUs hold less than ``threshold_mib`` each; None without nvidia-smi. Raises on timeout."""
    t0 = time.monotonic()
    while True:
        used = gpus.memory_used_mib(ids)
        if used is None:
            return None
        if all(v < threshold_mib for v in used.values()):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout_s:
            raise LaunchError(
                FailureKind.UNKNOWN,
                f"GPU memory still in use {used} MiB {timeout_s:.0f} s after the server stopped: a leftover process "
                f"holds it (check `nvidia-smi`); the next trial on these GPUs would run out of memory.",
            )
        time.sleep(0.2)


@contextlib.contextmanager
def launched(spec: LaunchSpec, log_path: Path) -> Iterator[ServerProcess]:
    """Start the server, wait until ready, yield it, and always tear the process group down."""
    server = ServerProcess(spec, log_path)
    server.start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
