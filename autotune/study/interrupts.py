"""How a running study stops early: Ctrl-C, SIGTERM, or the Ray cluster going away.

- First Ctrl-C (SIGINT): no new trial starts; running trials finish and are recorded. A second Ctrl-C cancels them.
- SIGTERM: no new trial starts and running trials are cancelled at once (the sender wants the process gone soon).
- The Ray cluster lost (a dead raylet or GCS, an unreachable cluster): ``RayWatchdog`` notices within seconds and
  interrupts the driver, which records an infrastructure stop (not a trial outcome; the sampler is not told).

In every case the driver exports what it has with a banner saying the study did not finish, and exits non-zero: 130
(SIGINT), 143 (SIGTERM), 4 (infrastructure). Rerunning the same command resumes the study.
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

EXIT_INFRASTRUCTURE = 4


class StudyCancelled(KeyboardInterrupt):
    """Raised in the driver's main thread to cancel the running trials (second Ctrl-C, SIGTERM, Ray lost)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM where no trial runs (Ray starting, Serve's shutdown, the export): the run stops there as a Ctrl-C stops
    it, and exits 143 (``autotune.search``)."""


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signal.Signals(signum).name)


@contextmanager
def keep_sigterm(handler: Callable[[int, FrameType | None], None] | None = None) -> Iterator[None]:
    """Keep SIGTERM's handler as the block found it, or with ``handler`` (main thread only). ``ray.init`` installs a
    handler that calls ``sys.exit(15)``: a driver signalled outside the trials exited with code 15, saying nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = signal.getsignal(signal.SIGTERM)
    if handler is not None:
        signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, kept)


def sigterm_raises() -> contextlib.AbstractContextManager[None]:
    """SIGTERM raises ``Terminated`` in the block (the stop handlers take it over while trials run)."""
    return keep_sigterm(_raise_terminated)


@dataclass
class StopState:
    """Why the study is stopping early; empty while it runs normally."""

    signal_name: str = ""  # "SIGINT" / "SIGTERM"
    infrastructure: str = ""  # what the watchdog found

    @property
    def stopping(self) -> bool:
        return bool(self.signal_name or self.infrastructure)

    @property
    def exit_code(self) -> int:
        if self.infrastructure:
            return EXIT_INFRASTRUCTURE
        return 128 + int(getattr(signal, self.signal_name)) if self.signal_name else 0

    @property
    def banner(self) -> str:
        if self.infrastructure:
            return (
                f"STOPPED: the Ray cluster was lost ({self.infrastructure}); the study did not finish. "
                f"Rerun the same command to resume it."
            )
        if self.signal_name:
            return (
                f"INTERRUPTED ({self.signal_name}): the study did not finish; these results cover the trials "
                f"recorded so far. Rerun the same command to resume it."
            )
        return ""


@contextmanager
def stop_handlers(state: StopState, on_first_stop: Callable[[], None], say: Callable[[str], None]) -> Iterator[None]:
    """Install SIGINT / SIGTERM handlers for the block (main thread only), restoring the previous ones after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if state.infrastructure:
            raise StudyCancelled(state.infrastructure)
        first = not state.signal_name
        if first:
            state.signal_name = name
            on_first_stop()
        if name == "SIGINT" and first:
            say(
                "\ninterrupted: no new trial will start; waiting for the running trial(s) to finish and be recorded. "
                "Press Ctrl-C again to cancel them."
            )
            return
        say(f"\n{name}: cancelling the running trial(s)")
        raise StudyCancelled(name)

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, on_signal)
    try:
        yield
    finally:
        for s, h in old.items():
            # after a lost cluster, Ray's driver-side core worker may still raise SIGINT about its dead raylet
            signal.signal(s, signal.SIG_IGN if state.infrastructure and s == signal.SIGINT else h)


class RayWatchdog:
    """A daemon thread that checks the Ray cluster every ``period_s``; when it is gone, sets ``state.infrastructure``
    and interrupts the main thread (which then raises StudyCancelled from its SIGINT handler).

    ``probe`` returns '' while the cluster is healthy, else what is wrong; a probe that does not return within
    ``probe_timeout_s`` counts as a lost cluster."""

    def __init__(
        self,
        state: StopState,
        probe: Callable[[], str],
        *,
        period_s: float = 1.0,
        probe_timeout_s: float = 30.0,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.state = state
        self.probe = probe
        self.period_s = period_s
        self.probe_timeout_s = probe_timeout_s
        self.on_lost = on_lost or (lambda: _thread.interrupt_main(signal.SIGINT))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="autotune-ray-watchdog", daemon=True)

    def __enter__(self) -> RayWatchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    def _check(self) -> str:
        box: list[str] = []

        def run() -> None:
            try:
                box.append(self.probe())
            except Exception as exc:  # noqa: BLE001 - any failure to reach the cluster is the finding
                box.append(f"{type(exc).__name__}: {exc}")

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(self.probe_timeout_s)
        return box[0] if box else f"the cluster did not answer within {self.probe_timeout_s:g} s"

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            problem = self._check()
            if problem and not self._stop.is_set():
                self.state.infrastructure = problem
                self.on_lost()
                return


def ray_probe(period_s: float = 5.0) -> Callable[[], str]:
    """A probe of the connected Ray cluster: the Ray processes this driver started (raylet, GCS) must be running, and
    every ``period_s`` the GCS must answer."""
    import ray
    from ray._private import worker as ray_worker

    last = [time.monotonic()]

    def probe() -> str:
        node = getattr(ray_worker, "_global_node", None)
        for kind, infos in (getattr(node, "all_processes", None) or {}).items():
            if kind not in ("raylet", "gcs_server"):
                continue
            for info in infos:
                code = info.process.poll()
                if code is not None:
                    return f"the local {kind} exited with code {code}"
        if time.monotonic() - last[0] >= period_s:
            last[0] = time.monotonic()
            if not any(n.get("Alive") for n in ray.nodes()):
                return "no Ray node is alive"
        return ""

    return probe
