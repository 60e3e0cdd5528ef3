"""The asyncio driver: runs each DP replica's ``Scheduler`` against a scaled wall clock and wakes the request handlers.

Simulated time = (wall - start) x time_scale. An iteration that costs ``d`` simulated seconds ends ``d / time_scale``
wall seconds later; small Python lags are caught up (the next iteration starts at the previous one's simulated end), so
throughput does not drift with the host's speed unless the host cannot keep up at all.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from autotune.sim.config import SimConfig
from autotune.sim.offline import make_scheduler
from autotune.sim.scheduler import Iteration, Scheduler, SimRequest

CATCHUP_WALL_S = 0.05  # lags up to this much wall time are absorbed by the simulated schedule


@dataclass(eq=False)
class Handle:
    """What a request handler waits on: the scheduler's request plus a wake-up event."""

    req: SimRequest
    submitted_sim: float
    event: asyncio.Event = field(default_factory=asyncio.Event)
    aborted: bool = False
    notify_after: float = 0.0  # wall (monotonic) time before which new tokens do not wake the handler

    @property
    def finished(self) -> bool:
        return self.req.done


@dataclass
class Counters:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    requests: int = 0
    finished_requests: int = 0
    verify_calls: int = 0
    accepted_tokens: int = 0  # tokens produced by verify steps (for the lifetime accept length)
    retractions: int = 0
    ttft: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    last_gen_throughput: float = 0.0


class SimClock:
    def __init__(self, time_scale: float) -> None:
        self.scale = time_scale
        self.wall0 = time.monotonic()
        self.epoch0 = time.time()

    def now(self) -> float:
        return (time.monotonic() - self.wall0) * self.scale

    def wall_at(self, sim: float) -> float:
        return self.wall0 + sim / self.scale


class Noise:
    """Deterministic multiplicative noise on step durations: a slow component (per simulated second) and a fast one."""

    def __init__(self, level: float, seed: int) -> None:
        self.level = level
        self._rng = random.Random(seed * 7919 + 17)
        self._window = -1
        self._slow = 0.0

    def factor(self, sim_time: float) -> float:
        if self.level <= 0:
            return 1.0
        window = int(sim_time)
        if window != self._window:
            self._window = window
            self._slow = 0.6 * self._slow + 0.8 * self._rng.gauss(0.0, 1.0)
        return max(0.5, 1.0 + self.level * (0.8 * self._slow + 0.4 * self._rng.gauss(0.0, 1.0)))


class Engine:
    def __init__(
        self, cfg: SimConfig, *, time_scale: float, seed: int, noise: float, log: Callable[[str], None]
    ) -> None:
        self.cfg = cfg
        self.clock = SimClock(time_scale)
        self.log = log
        self.schedulers: list[Scheduler] = [make_scheduler(cfg, seed + 1000 * i) for i in range(cfg.dp)]
        self._noise = [Noise(noise, seed + i) for i in range(cfg.dp)]
        self._wake = [asyncio.Event() for _ in range(cfg.dp)]
        self._handles: dict[int, Handle] = {}
        self._rr = itertools.count()
        self._ids = itertools.count()
        self.counters = Counters()
        self._flush_verify = 0
        self._flush_accepted = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._last_log_wall = 0.0
        self._decode_iters = 0
        self._window_tokens = 0
        self._window_sim = 0.0

    # ---- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._loop(i)) for i in range(len(self.schedulers))]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # ---- requests ----------------------------------------------------------------------------------------------
    def submit(self, prompt_tokens: int, max_new_tokens: int) -> Handle:
        rid = next(self._ids)
        now = self.clock.now()
        req = SimRequest(f"{rid:x}", prompt_tokens, max_new_tokens, arrival=now)
        h = Handle(req, now)
        self._handles[id(req)] = h
        i = next(self._rr) % len(self.schedulers)
        self.schedulers[i].add(req)
        self.counters.requests += 1
        self.counters.prompt_tokens += prompt_tokens
        self._wake[i].set()
        return h

    def abort(self, h: Handle) -> None:
        h.aborted = True
        for s in self.schedulers:
            s.abort(h.req)
        self._handles.pop(id(h.req), None)

    # ---- state for /server_info and /metrics -------------------------------------------------------------------
    @property
    def running(self) -> int:
        return sum(len(s.running) + (1 if s.chunked else 0) for s in self.schedulers)

    @property
    def queued(self) -> int:
        return sum(len(s.waiting) for s in self.schedulers)

    @property
    def used_tokens(self) -> int:
        return sum(s.kv_used for s in self.schedulers)

    @property
    def token_usage(self) -> float:
        cap = self.cfg.kv_tokens * len(self.schedulers)
        return self.used_tokens / cap if cap else 0.0

    @property
    def avg_accept_length(self) -> float | None:
        if self.cfg.spec is None:
            return None
        v = self.counters.verify_calls - self._flush_verify
        a = self.counters.accepted_tokens - self._flush_accepted
        return a / v if v else 1.0

    def flush(self) -> bool:
        """Reset the lifetime accept length (SGLang's /flush_cache); refused while requests are in flight."""
        if self.running or self.queued:
            return False
        self._flush_verify = self.counters.verify_calls
        self._flush_accepted = self.counters.accepted_tokens
        return True

    # ---- the loop ----------------------------------------------------------------------------------------------
    async def _loop(self, i: int) -> None:
        sched, wake, noise = self.schedulers[i], self._wake[i], self._noise[i]
        cursor = self.clock.now()
        catchup = CATCHUP_WALL_S * self.clock.scale
        while True:
            if not sched.has_work():
                wake.clear()
                await wake.wait()
                cursor = max(cursor, self.clock.now())
                continue
            now = self.clock.now()
            start = cursor if now - cursor <= catchup else now
            it = sched.step(start)
            if it is None:
                wake.clear()
                await wake.wait()
                continue
            end = start + it.duration * noise.factor(start)
            delay = self.clock.wall_at(end) - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                await asyncio.sleep(0)
            cursor = end
            self._publish(it, start, end)

    def _publish(self, it: Iteration, start: float, end: float) -> None:
        Scheduler.stamp(it, end)
        c = self.counters
        wall = time.monotonic()
        handles = self._handles
        for r, n in it.produced:
            c.generation_tokens += n
            h = handles.get(id(r))
            if h is not None and wall >= h.notify_after:
                h.event.set()
        if it.kind == "decode" and self.cfg.spec is not None:
            c.verify_calls += it.batch_size
            c.accepted_tokens += it.new_tokens
        c.retractions += it.retracted
        for r in it.finished:
            c.finished_requests += 1
            if r.first_token_at is not None:
                c.ttft.append(r.first_token_at - r.arrival)
            c.e2e.append(end - r.arrival)
            h = self._handles.pop(id(r), None)
            if h is not None:
                h.event.set()
        if it.retracted:
            self.log(f"KV cache pool is full. Retract requests. #retracted_reqs: {it.retracted}")
        self._window_tokens += it.new_tokens if it.kind == "decode" else 0
        self._window_sim += end - start
        if it.kind == "decode":
            self._decode_iters += 1
            self._maybe_log_decode(it)

    def _maybe_log_decode(self, it: Iteration) -> None:
        interval = max(1, self.cfg.args.decode_log_interval)
        wall = time.monotonic()
        if self._decode_iters % interval != 0 or wall - self._last_log_wall < 1.0:
            return
        gen = self._window_tokens / self._window_sim if self._window_sim > 0 else 0.0
        self.counters.last_gen_throughput = gen
        self._window_tokens, self._window_sim, self._last_log_wall = 0, 0.0, wall
        acc = self.avg_accept_length or 1.0
        self.log(
            f"Decode batch, #running-req: {self.running}, #token: {self.used_tokens}, accept len: {acc:.2f}, "
            f"gen throughput (token/s): {gen:.2f}, token usage: {self.token_usage:.2f}, "
            f"cuda graph: {it.graph}, #queue-req: {self.queued}"
        )


def percentile(values: list[float], q: float) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]
