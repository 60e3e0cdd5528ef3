"""The simulated engine's driver: a discrete-event simulation of the DP replicas' schedulers on a virtual clock.

Every figure the engine reports comes from its virtual clock, which moves only from one event to the next: the end of
an iteration (its duration from the performance model, times the seeded noise) or the arrival of a request. The wall
clock never enters a figure. It only paces the simulation: an event at virtual time ``t`` is released no earlier than
``(t - t_anchor) / time_scale`` wall seconds after the anchor (re-set whenever the engine waited, and when the host lags
more than ``CATCHUP_WALL_S``), so a client sees roughly ``time_scale`` virtual seconds pass per wall second. A slow or
busy host makes the simulation take longer in wall time, never changes what it computes.

Requests join the timeline by the virtual-clock protocol (``autotune/core/virtual_clock.py``): a request that carries its
virtual send time joins at that time, and while the client has announced requests that have not arrived yet
(``expected``), the engine does not move its clock past the earliest of their announced send times. A closed-loop
client that sends its next request at the virtual finish time of the previous one, or an open-loop client that
announces each next arrival at its scheduled time, therefore gets the same timeline whatever the host load or the time
scale. Requests without a send time join at the current virtual time interpolated from the wall clock (the clock does
not move while the engine is idle). Simultaneous arrivals are ordered by their sizes, not by which one reached the
socket first.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import itertools
import math
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
        # announced requests (protocol) not arrived yet, sorted: (send time, True) for one announced for that time,
        # (time, False) for one announced at a window's start or a finish, which comes then or later
        self._expected: list[tuple[float, bool]] = []
        self._waiters: list[tuple[float, asyncio.Future[int]]] = []  # in_flight_at calls: (virtual time, answer)
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
    @property
    def expected(self) -> int:
        """Announced requests that have not arrived yet."""
        return len(self._expected)

    def hold(self, n: int, at: float | None = None) -> float:
        """Expect ``n`` more requests, sent at virtual time ``at`` (now when None): the clock does not move past it until
        they arrived. Returns the current virtual time (the send time of requests announced without ``at``)."""
        entry = (self.now, False) if at is None else (max(at, self.now), True)
        for _ in range(max(0, n)):
            bisect.insort(self._expected, entry)
        self._expected_changed()
        return self.now

    def release(self, n: int) -> float:
        """Expect ``n`` fewer requests (a client worker that stops); the latest announced go first, so the clock never
        moves past a request that may still come."""
        del self._expected[max(0, len(self._expected) - max(0, n)) :]
        self._expected_changed()
        return self.now

    def _fill(self, send_time: float) -> None:
        """A protocol request sent at ``send_time`` arrived: it fills the announcement for that very time, else the
        latest other one at or before it (the earlier ones stay bounds on requests still to come), else the earliest."""
        exp = self._expected
        i = bisect.bisect_left(exp, (send_time, True))
        if i == len(exp) or exp[i] != (send_time, True):
            below = range(bisect.bisect_right(exp, (send_time, False)) - 1, -1, -1)
            i = next((j for j in below if not exp[j][1]), 0)
        del exp[i]
        self._expected_changed()

    def _expected_changed(self) -> None:
        self._expected_since = time.monotonic()
        self._wake.set()

    async def in_flight_at(self, t: float, timeout: float) -> int | None:
        """Once the engine has done everything before virtual time ``t`` (no event and no announced request is left
        before it): the requests that joined by ``t`` and had not finished. None when that took over ``timeout`` wall
        seconds. An open-loop client asks this at each send time: the requests in flight on the virtual clock."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append((t, fut))
        self._wake.set()
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return None
        finally:
            self._waiters = [w for w in self._waiters if w[1] is not fut]

    def _answer_waiters(self, frontier: float) -> None:
        """Answer the ``in_flight_at`` calls for times up to ``frontier``: every event before it has been processed and
        no announced request can join before it."""
        for t, fut in self._waiters:
            if t <= frontier and not fut.done():
                fut.set_result(sum(1 for h in self._handles.values() if h.arrival <= t))

    # ---- requests ----------------------------------------------------------------------------------------------
    def submit(
        self, prompt_tokens: int, max_new_tokens: int, send_time: float | None = None, *, successor: bool = True
    ) -> Handle:
        """Put a request on the timeline: at ``send_time`` (protocol; not before now) or at the interpolated now.
        ``successor``: its end makes the engine expect the client's next request (protocol, closed loop)."""
        if send_time is not None:
            arrival = max(send_time, self.now)
            if self._expected:
                self._fill(arrival)
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
        if self._expected or not self._events:
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
            if self._expected and self._expected[0][0] <= self.now:
                await self._await_expected()  # a request may still join now: nothing starts before it did
                continue
            self._admit_incoming()
            if self._events and self._events[0][0] <= self.now:
                self._process_due()
                await asyncio.sleep(0)  # let the handlers woken by these events run, even when the pace is behind
                continue
            self._start_idle_replicas()
            t = self._events[0][0] if self._events else math.inf
            if self._expected and self._expected[0][0] <= t:
                await self._await_expected()  # an announced request may join before the next event
                continue
            self._answer_waiters(t)
            if not self._events:
                await self._sleep(None)
                self.pacer.anchor(self.now)
                continue
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
        self._answer_waiters(min(self._expected[0][0], self._events[0][0] if self._events else math.inf))
        left = self._expected_since + self.hold_timeout_s - time.monotonic()
        if left <= 0:
            self.log(
                f"sim clock: {self.expected} announced request(s) did not arrive within {self.hold_timeout_s:g} s "
                f"(wall); the clock goes on without them at t={self.now:.6f}"
            )
            self._expected.clear()
        else:
            await self._sleep(left)
        self.pacer.anchor(self.now)

    def _admit_incoming(self) -> None:
        """Put submitted requests on the timeline, simultaneous ones in an order that does not depend on the host: those
        before the earliest announced send time (a request announced for a time joins with the others of that time)."""
        if not self._incoming:
            return
        bound = self._expected[0][0] if self._expected else math.inf
        now = [h for h in self._incoming if h.arrival < bound]
        for h in sorted(now, key=lambda h: (h.arrival, h.req.prompt_tokens, h.req.max_new_tokens)):
            heapq.heappush(self._events, (h.arrival, _ARRIVAL, next(self._seq), h))
        self._incoming = [h for h in self._incoming if h.arrival >= bound]

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
                    bisect.insort(self._expected, (end, False))  # its client sends the next request now, or releases
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
