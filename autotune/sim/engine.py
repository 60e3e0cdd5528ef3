"""The simulated engine's driver: a discrete-event simulation of the DP replicas' schedulers on a virtual clock.

Every figure the engine reports comes from its virtual clock, which moves only from one event to the next: the end of
an iteration (its duration from the performance model, times the seeded noise) or the arrival of a request. The wall
clock never enters a figure. It only paces the simulation: an event at virtual time ``t`` is released no earlier than
``(t - t_anchor) / time_scale`` wall seconds after the anchor (re-set whenever the engine waited, and when the host lags
more than ``CATCHUP_WALL_S``), so a client sees roughly ``time_scale`` virtual seconds pass per wall second. A slow or
busy host makes the simulation take longer in wall time, never changes what it computes.

Requests join the timeline by the virtual-clock protocol (``autotune/core/virtual_clock.py``): a request that carries its
virtual send time joins at that time, and while the client has announced requests that have not arrived yet
(``expected``), the engine does not move its clock. A closed-loop client that sends its next request at the virtual
finish time of the previous one therefore gets the same timeline whatever the host load or the time scale. Requests
without a send time join at the current virtual time interpolated from the wall clock (the clock does not move while
the engine is idle). Simultaneous arrivals are ordered by their sizes, not by which one reached the socket first.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass

from autotune.sim.config import SimConfig
from autotune.sim.handle import Counters, Handle
from autotune.sim.offline import make_scheduler
from autotune.sim.pacing import Noise, Pacer
from autotune.sim.scheduler import Iteration, Scheduler, SimRequest

CATCHUP_WALL_S = 0.05  # a host lagging more than this behind the pace re-anchors it instead of racing to catch up
MIN_SLEEP_S = 0.001  # shorter leads are not slept (the event loop's timer granularity); the anchor keeps the average
HOLD_TIMEOUT_S = 30.0  # wall seconds the engine waits for an announced request before it goes on without it

_END, _ARRIVAL = 0, 1  # event kinds; at equal times iterations end (and free memory) before arrivals are admitted


@dataclass(frozen=True)
class _InFlight:
    it: Iteration
    start: float


class EngineLoop:
    """The simulated server's engine: the scheduler stepping its batches on the virtual clock (``autotune.engines``'
    ``SimEngine`` is the adapter that launches this server like SGLang)."""

    def __init__(
        self,
        cfg: SimConfig,
        *,
        time_scale: float,
        seed: int,
        noise: float,
        log: Callable[[str], None],
        hold_timeout_s: float = HOLD_TIMEOUT_S,
    ) -> None:
        self.cfg = cfg
        self.pacer = Pacer(time_scale)
        self.log = log
        self.hold_timeout_s = hold_timeout_s
        self.now = 0.0  # virtual seconds: the time of the last event processed
        self.expected = 0  # announced requests (protocol) that have not arrived yet
        self.schedulers: list[Scheduler] = [make_scheduler(cfg, seed + 1000 * i) for i in range(cfg.dp)]
        self._noise = [Noise(noise, seed + i) for i in range(cfg.dp)]
        self._inflight: list[_InFlight | None] = [None] * cfg.dp
        self._events: list[tuple[float, int, int, int | Handle]] = []  # (time, kind, seq, replica | handle)
        self._seq = itertools.count()
        self._incoming: list[Handle] = []  # submitted, not yet on the timeline (kept while requests are expected)
        self._expected_since = time.monotonic()
        self._wake = asyncio.Event()
        self._handles: dict[int, Handle] = {}
        self._rr = itertools.count()
        self._ids = itertools.count()
        self.counters = Counters()
        self._flush_verify = 0
        self._flush_accepted = 0
        self._task: asyncio.Task[None] | None = None
        self._last_log_wall = 0.0
        self._decode_iters = 0
        self._window_tokens = 0
        self._window_sim = 0.0

    # ---- lifecycle ---------------------------------------------------------------------------------------------
    def start(self) -> None:
        self.pacer.anchor(self.now)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    # ---- the virtual-clock protocol ----------------------------------------------------------------------------
    def hold(self, n: int) -> float:
        """Expect ``n`` more requests before the clock moves; returns the current virtual time (their send time)."""
        self._set_expected(self.expected + max(0, n))
        return self.now

    def release(self, n: int) -> float:
        """Expect ``n`` fewer requests (a client worker that stops)."""
        self._set_expected(max(0, self.expected - max(0, n)))
        return self.now

    def _set_expected(self, n: int) -> None:
        self.expected = n
        self._expected_since = time.monotonic()
        self._wake.set()

    # ---- requests ----------------------------------------------------------------------------------------------
    def submit(
        self, prompt_tokens: int, max_new_tokens: int, send_time: float | None = None, *, successor: bool = True
    ) -> Handle:
        """Put a request on the timeline: at ``send_time`` (protocol; not before now) or at the interpolated now.
        ``successor``: its end makes the engine expect the client's next request (protocol, closed loop)."""
        if send_time is not None:
            arrival = max(send_time, self.now)
            if self.expected > 0:
                self._set_expected(self.expected - 1)
        else:
            arrival = self._interpolated_now()
        rid = next(self._ids)
        req = SimRequest(f"{rid:x}", prompt_tokens, max_new_tokens, arrival=arrival)
        h = Handle(req, arrival, tagged=send_time is not None and successor)
        self._handles[id(req)] = h
        self._incoming.append(h)
        self._wake.set()
        return h

    def _interpolated_now(self) -> float:
        """Virtual time now for a request without a send time: the paced position between the last and next events."""
        if self.expected > 0 or not self._events:
            return self.now  # waiting for a client, or idle: the clock stands still
        return min(max(self.pacer.virtual_at(time.monotonic()), self.now), self._events[0][0])

    def abort(self, h: Handle) -> None:
        """The client went away: drop the request. Under the protocol this expects nothing more: a worker that gave up on
        a request (a wall timeout) has lost its place on the clock, and waiting for it could stall everyone."""
        if h.aborted:
            return
        h.aborted = True
        for s in self.schedulers:
            s.abort(h.req)
        self._handles.pop(id(h.req), None)
        if h in self._incoming:
            self._incoming.remove(h)
        self._wake.set()

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
        if self.running or self.queued or self._incoming:
            return False
        self._flush_verify = self.counters.verify_calls
        self._flush_accepted = self.counters.accepted_tokens
        return True

    def reset_accept_counters(self) -> None:
        """Zero the counters behind ``avg_accept_length`` (SGLang 0.5.17 does so on a successful
        ``/set_internal_state``, requests in flight or not)."""
        self._flush_verify = self.counters.verify_calls
        self._flush_accepted = self.counters.accepted_tokens

    # ---- the event loop ----------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            if self.expected > 0:
                await self._await_expected()
                continue
            self._admit_incoming()
            if self._events and self._events[0][0] <= self.now:
                self._process_due()
                await asyncio.sleep(0)  # let the handlers woken by these events run, even when the pace is behind
                continue
            self._start_idle_replicas()
            if not self._events:
                await self._sleep(None)
                self.pacer.anchor(self.now)
                continue
            t = self._events[0][0]
            delay = self.pacer.wall_at(t) - time.monotonic()
            if delay < -CATCHUP_WALL_S:
                self.pacer.anchor(t)
            elif delay > MIN_SLEEP_S and await self._sleep(delay):
                continue  # a request came in while pacing: it may belong before t
            self.now = t

    async def _sleep(self, timeout: float | None) -> bool:
        """Wait for a submit/hold/release or ``timeout`` wall seconds; True when woken."""
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    async def _await_expected(self) -> None:
        left = self._expected_since + self.hold_timeout_s - time.monotonic()
        if left <= 0:
            self.log(
                f"sim clock: {self.expected} announced request(s) did not arrive within {self.hold_timeout_s:g} s "
                f"(wall); the clock goes on without them at t={self.now:.6f}"
            )
            self.expected = 0
        else:
            await self._sleep(left)
        self.pacer.anchor(self.now)

    def _admit_incoming(self) -> None:
        """Put submitted requests on the timeline, simultaneous ones in an order that does not depend on the host."""
        if not self._incoming:
            return
        for h in sorted(self._incoming, key=lambda h: (h.arrival, h.req.prompt_tokens, h.req.max_new_tokens)):
            heapq.heappush(self._events, (h.arrival, _ARRIVAL, next(self._seq), h))
        self._incoming.clear()

    def _process_due(self) -> None:
        while self._events and self._events[0][0] <= self.now:
            _, kind, _, what = heapq.heappop(self._events)
            if kind == _END:
                assert isinstance(what, int)
                self._end_iteration(what)
            else:
                assert isinstance(what, Handle)
                self._arrive(what)

    def _arrive(self, h: Handle) -> None:
        if h.aborted:
            return
        i = next(self._rr) % len(self.schedulers)
        self.schedulers[i].add(h.req)
        self.counters.requests += 1
        self.counters.prompt_tokens += h.req.prompt_tokens

    def _start_idle_replicas(self) -> None:
        for i, sched in enumerate(self.schedulers):
            if self._inflight[i] is not None or not sched.has_work():
                continue
            it = sched.step(self.now)
            if it is None:
                continue
            end = self.now + it.duration * self._noise[i].factor(self.now)
            self._inflight[i] = _InFlight(it, self.now)
            heapq.heappush(self._events, (end, _END, next(self._seq), i))

    def _end_iteration(self, i: int) -> None:
        flight = self._inflight[i]
        assert flight is not None
        self._inflight[i] = None
        self._publish(flight.it, flight.start, self.now)

    def _publish(self, it: Iteration, start: float, end: float) -> None:
        Scheduler.stamp(it, end)
        c = self.counters
        wall = time.monotonic()
        handles = self._handles
        for r, n in it.produced:
            c.generation_tokens += n
            h = handles.get(id(r))
            if h is None:
                continue
            h.output, h.verify_ct, h.accepted_drafts = r.output, r.verify_ct, r.accepted_drafts
            h.events.append((end, r.output))
            if wall >= h.notify_after:
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
            h = handles.pop(id(r), None)
            if h is not None:
                h.finished_at = end
                if h.tagged:
                    self.expected += 1  # its client sends the next request now, or releases
                    self._expected_since = wall
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
