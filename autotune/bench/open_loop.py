"""One window of an open-loop level: units sent at scheduled times, whatever the server does.

Send times come from the level's ``Load``: a rate's gamma/Poisson arrivals (``load.arrival_times``), or a trace's own
timestamps (``load.trace_times``). Each unit is sent at its time without waiting for earlier answers; a conversation's
later turns follow its earlier ones (after their answer and think time).

Pacing on a real server (wall clock x time scale): the sender sleeps until each send time. A send that is late (the
client's own event loop was busy) goes out at once; up to ``SHIFT_S`` of lateness is absorbed by the next sends
(host jitter does not lower the rate), while a longer stall moves the rest of the schedule by that lateness: the missed
requests are not sent in a burst to catch up (AIPerf's no-catch-up). Each send's lateness is recorded (``Lateness``;
``late`` counts sends more than ``LATE_S`` behind). On a simulated server with a virtual clock the sender announces each next arrival
at its virtual send time (``/sim/hold``; the engine runs up to it) and sends every unit with its virtual send time, so
lateness is 0 by construction. At ``plan.level_timeout_s`` (wall) the window sends nothing more and its requests still
in flight become failed samples.

A level is *over-saturated* when ``plan.max_in_flight`` requests are unanswered at a send time: the server is falling
ever further behind the offered rate. The window then stops sending, waits for the requests in flight, and says so. On
the virtual clock the count is the server's, at the virtual send time (the sender runs ahead of the engine in wall
time, so its own count of unanswered requests would say nothing about the server).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import numpy as np

from autotune.bench import sim_clock
from autotune.bench.load import Load, arrival_times, trace_times
from autotune.bench.sim_clock import VirtualSlot
from autotune.bench.source import PreparedUnit, Turn
from autotune.bench.stream import Clock, failed_sample, send_request
from autotune.bench.types import BenchPlan, Lateness, RequestSample
from autotune.core.errors import BenchError

LATE_S = 0.010  # a send more than 10 ms (engine) behind its time counts as late
SHIFT_S = 0.100  # a send more than 100 ms (engine) behind moves the rest of the schedule (no catch-up)


@dataclass(frozen=True)
class OpenRun:
    samples: tuple[RequestSample, ...]
    wall_s: float
    server_gone: bool
    timed_out: bool
    engine_s: float
    lateness: Lateness
    saturated: str  # why the window stopped sending early; "" when it sent every unit
    offered_rate: float  # units per engine second actually sent (the schedule's rate, less any shift)
    late_s: tuple[float, ...] = ()  # each send's lateness (engine seconds), for the level's figures over its windows
    sends: int = 0  # units sent (the window's first ``sends`` units), and the engine seconds from the first send to the
    span_s: float = 0.0  # last: the level pools the gaps between sends over its windows


def schedule(units: list[PreparedUnit], load: Load, seed: int, window: int) -> np.ndarray:
    """Send times (engine seconds from the window's start) of ``units`` under ``load``."""
    if load.kind == "rate":
        return arrival_times(load, len(units), seed, window)
    arrivals = [u[0].request.arrival_s for u in units]
    if any(a is None for a in arrivals):
        raise BenchError(f"load level {load.key} replays a trace's timing: it needs workload kind 'trace'")
    return trace_times([float(a) for a in arrivals if a is not None], load)


def level_offered_rate(runs: list[OpenRun]) -> float | None:
    """A level's offered rate: every window's gaps between sends over their engine seconds, pooled (a mean of the
    windows' own rates is dominated by a window of two sends close together); None where no window sent two units
    apart in time."""
    span = math.fsum(r.span_s for r in runs)
    return sum(max(0, r.sends - 1) for r in runs) / span if span > 0 else None


def level_lateness(runs: list[OpenRun]) -> Lateness:
    """A level's lateness over every send of its windows; the shift is the sum of the windows' shifts."""
    return _lateness([x for r in runs for x in r.late_s], math.fsum(r.lateness.shift_s for r in runs))


def _lateness(values: list[float], shift: float) -> Lateness:
    if not values:
        return Lateness(0.0, 0.0, 0.0, 0, shift)
    arr = np.asarray(values)
    p99 = float(np.percentile(arr, 99.0))
    return Lateness(float(arr.mean()), p99, float(arr.max()), int((arr > LATE_S).sum()), shift)


async def run_open_window(
    client: httpx.AsyncClient,
    units: list[PreparedUnit],
    plan: BenchPlan,
    load: Load,
    window: int,
    scale: float,
    clock: Clock,
    virtual: bool,
    record: Callable[[Turn], None] | None = None,
) -> OpenRun:
    """Send ``units`` at their times under ``load``; ``record`` is told of each turn as it is sent."""
    times = schedule(units, load, plan.workload.seed, window)
    samples: list[RequestSample] = []
    state = {"sent": 0, "gone": False}
    finish: list[float] = []
    late: list[float] = []
    saturated = ""
    start = clock()
    t0 = await sim_clock.hold(client, 1) if virtual else 0.0

    async def run_unit(unit: PreparedUnit, slot: VirtualSlot | None) -> None:
        for k, turn in enumerate(unit):
            if k and turn.think_s > 0:
                if slot is not None:
                    slot.t += turn.think_s
                else:
                    await asyncio.sleep(turn.think_s / scale)
            if slot is not None:
                slot.successor = k + 1 < len(unit)
            state["sent"] += 1
            if record is not None:
                record(turn)
            sample, gone = await send_request(client, turn.body, scale, plan.request_timeout_s, clock, slot)
            samples.append(sample)
            state["gone"] = state["gone"] or gone
            if gone or not sample.ok:
                break
        if slot is not None:
            finish.append(slot.t)

    tasks: list[asyncio.Task[None]] = []
    shift = 0.0  # engine seconds the schedule has moved (no catch-up)
    held = 1 if virtual else 0  # announced arrivals not yet sent
    deadline = start + plan.level_timeout_s  # wall: the window sends nothing after it, as a closed loop
    cut = False
    for i, unit in enumerate(units):
        if state["gone"]:
            break
        if clock() >= deadline:
            cut = True
            break
        if virtual:
            # Announce the next arrival at its time (the engine runs up to it, not past it; send times never decrease)
            # and count the requests in flight at this send time on the virtual clock. The first unit was announced at
            # t0, which holds the engine there: its count is taken at t0.
            nxt = t0 + float(times[i + 1]) if i + 1 < len(units) else None
            in_flight = await sim_clock.hold_at(client, int(nxt is not None), nxt, t0 + float(times[i]) if i else t0)
            held += int(nxt is not None)
            where = "in flight at the virtual send time"
        else:
            in_flight = state["sent"] - len(samples)
            where = "unanswered"
        if in_flight >= plan.max_in_flight:
            saturated = (
                f"{in_flight} requests {where} (max_in_flight {plan.max_in_flight}) after {i} of {len(units)} "
                f"sends at {load.key}: the server cannot keep up with this load"
            )
            break
        slot = None
        if virtual:
            held -= 1
            slot = VirtualSlot(t0 + float(times[i]))
        else:
            due = start + (float(times[i]) + shift) / scale
            now = clock()
            if due >= deadline:
                cut = True
                break
            if due > now:
                await asyncio.sleep(due - now)
                now = clock()
            behind = max(0.0, (now - due) * scale)
            late.append(behind)
            if behind > SHIFT_S:
                shift += behind
        tasks.append(asyncio.create_task(run_unit(unit, slot)))
        await asyncio.sleep(0)  # let the request start before the next send time is computed
    if held:
        await sim_clock.release(client, held)
    left = max(0.0, deadline - clock())
    timed_out = cut
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=left)
        timed_out = timed_out or bool(pending)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]  # a bug in the client, not a failed request
    in_flight = state["sent"] - len(samples)
    samples.extend(failed_sample(f"level timeout after {plan.level_timeout_s:g} s") for _ in range(in_flight))
    wall_s = clock() - start
    engine_s = (max(finish) - t0 if finish else wall_s * scale) if virtual else wall_s * scale
    span = float(times[len(tasks) - 1]) + shift if len(tasks) > 1 else 0.0  # the sends' actual span
    offered = (len(tasks) - 1) / span if span > 0 else 0.0
    return OpenRun(
        tuple(samples),
        wall_s,
        bool(state["gone"]),
        timed_out,
        max(engine_s, 1e-9),
        _lateness(late, shift),
        saturated,
        offered,
        tuple(late),
        len(tasks),
        span,
    )
