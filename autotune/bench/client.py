"""Streaming benchmark client for SGLang's native ``POST /generate``: one warm server, several load levels.

A plan runs as: ``GET /server_info`` (older SGLang: ``/get_server_info``) for the time scale; then each concurrency in
order: ``/flush_cache``, warmup requests (not measured), and independent windows, each a closed loop of ``concurrency``
workers that each send the next request as soon as their previous one ends, until ``requests_per_level`` requests were
sent and ``min_duration_s`` has passed (more windows until the plan's precision or cap is reached); then
``/server_info`` again for the server's own average accept length.

Time: a real server's durations are wall durations. A simulated server that declares a virtual clock
(``sim.clock == "virtual"``) is measured on that clock: each worker sends its requests at a virtual time (the level's
start, then the virtual finish of its previous request) and every duration comes from the virtual times the server puts
in each chunk (``autotune/bench/sim_clock.py``, ``autotune/core/virtual_clock.py``), so host load and the time scale never
enter a figure. An older simulated server without that clock is measured in wall time x its declared time scale.
Timeouts (``request_timeout_s``, ``level_timeout_s``) are wall seconds.

A request that gets an HTTP error, an error chunk, a broken stream or a timeout becomes a failed sample; an unreachable
server, or a level where every request failed, raises ``BenchError``. Definitions of TTFT / ITL / TPOT / e2e follow SGLang's
``bench_serving``; see docs/benchmark.md. One request is ``autotune/bench/stream.py``; ``/server_info`` and
``/flush_cache`` are ``autotune/bench/server_api.py``.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from autotune.bench import sim_clock
from autotune.bench.greedy import greedy_sample
from autotune.bench.load import Load
from autotune.bench.metrics import aggregate_windows, check_metric_name, summarize_level, window_stop_reason
from autotune.bench.open_loop import OpenRun, level_lateness, level_offered_rate, run_open_window
from autotune.bench.server_api import (
    FLUSH_RETRY_S,
    ServerInfo,
    fetch_server_info,
    flush_cache,
    reset_accept_counters,
)
from autotune.bench.sim_clock import VirtualSlot
from autotune.bench.source import PreparedUnit, RequestSource
from autotune.bench.stream import Clock, failed_sample, send_request
from autotune.bench.transport import _default_transport
from autotune.bench.types import BenchPlan, BenchResult, LevelSummary, RequestSample
from autotune.bench.workloads import check_workload, filter_counts
from autotune.bench.workloads.summary import traffic_stats
from autotune.core.errors import BenchError

_RequestSource = RequestSource  # the name tests and tools know


@dataclass
class _LoopState:
    issued: int = 0  # units (a request, or a conversation)
    sent: int = 0  # requests
    any_ok: bool = False
    gone: bool = False


@dataclass(frozen=True)
class _LevelRun:
    samples: tuple[RequestSample, ...]
    wall_s: float
    server_gone: bool
    timed_out: bool
    engine_s: float  # the level's duration in engine seconds (virtual, or wall x time scale)


async def _run_level(
    client: httpx.AsyncClient,
    source: RequestSource,
    plan: BenchPlan,
    concurrency: int,
    n: int,
    min_duration_s: float,
    scale: float,
    clock: Clock,
    virtual: bool = False,
) -> _LevelRun:
    """Closed loop: ``concurrency`` workers; issue until ``n`` were sent and ``min_duration_s`` (engine s) has passed.

    Past ``n``, requests are only issued until answers came back of which none succeeded (a failing server is not
    hammered for the whole window); after a refused connection nothing more is issued. With ``virtual`` (a simulated server's virtual
    clock) the workers announce themselves, send at their virtual times and release their slot when they stop.
    """
    source.prefetch(n)
    samples: list[RequestSample] = []
    state = _LoopState()
    start = clock()
    t0 = await sim_clock.hold(client, concurrency) if virtual else 0.0
    slots = [VirtualSlot(t0) if virtual else None for _ in range(concurrency)]

    def elapsed_s(slot: VirtualSlot | None) -> float:
        return slot.t - t0 if slot is not None else (clock() - start) * scale

    async def send_unit(unit: PreparedUnit, slot: VirtualSlot | None) -> None:
        for k, turn in enumerate(unit):
            if k and turn.think_s > 0:  # a conversation's next turn, after its think time (engine seconds)
                if slot is not None:
                    slot.t += turn.think_s
                else:
                    await asyncio.sleep(turn.think_s / scale)
            state.sent += 1
            source.record(turn)
            sample, gone = await send_request(client, turn.body, scale, plan.request_timeout_s, clock, slot)
            samples.append(sample)
            state.any_ok = state.any_ok or sample.ok
            state.gone = state.gone or gone
            if gone or not sample.ok:
                break  # a failed turn ends its conversation

    async def worker(slot: VirtualSlot | None) -> None:
        while not state.gone:
            # past n: stop once min_duration_s has passed, or once answers came back and none succeeded (a worker
            # that finds n issued before any answer still sends: the window runs at its full concurrency)
            if state.issued >= n and (elapsed_s(slot) >= min_duration_s or (samples and not state.any_ok)):
                break
            unit = source.next()
            state.issued += 1
            await send_unit(unit, slot)
        if slot is not None and not state.gone:
            await sim_clock.release(client)

    tasks = [asyncio.create_task(worker(slot)) for slot in slots]
    _, pending = await asyncio.wait(tasks, timeout=plan.level_timeout_s)
    for task in pending:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # a bug in the client, not a failed request
    in_flight = state.sent - len(samples)
    samples.extend(failed_sample(f"level timeout after {plan.level_timeout_s:g} s") for _ in range(in_flight))
    wall_s = clock() - start
    engine_s = max(s.t for s in slots if s is not None) - t0 if virtual else wall_s * scale
    return _LevelRun(tuple(samples), wall_s, state.gone, bool(pending), engine_s)


def requests_for_level(plan: BenchPlan, concurrency: int) -> int:
    return plan.requests_per_level or max(plan.min_requests, concurrency * plan.rounds)


def trace_cycle(plan: BenchPlan) -> int:
    """The units of one pass over a trace workload: its rows that are kept."""
    counts = filter_counts(plan.workload)
    return max(1, counts.kept if counts is not None else plan.min_requests)


def units_for_open_level(plan: BenchPlan, load: Load) -> int:
    """Units per window of an open-loop level: ``requests_per_level``, else ``max(min_requests, rate x
    rate_window_s)`` for a rate, the trace's rows (those kept) for a trace; a trace window starts at the trace's
    first row (``RequestSource.align``)."""
    if plan.requests_per_level:
        return plan.requests_per_level
    if load.kind == "rate":
        return max(plan.min_requests, math.ceil(load.rate * plan.rate_window_s))
    return trace_cycle(plan)


def _check_plan(plan: BenchPlan) -> None:
    if not plan.loads and (not plan.concurrencies or any(c < 1 for c in plan.concurrencies)):
        raise BenchError(f"plan concurrencies must be a non-empty list of integers >= 1, got {plan.concurrencies}")
    for load in plan.loads:
        problem = load.check()
        if problem is not None:
            raise BenchError(f"load level {load.key}: {problem}")
        if load.kind == "trace" and plan.workload.kind != "trace":
            raise BenchError(f"load level {load.key} replays a trace's timing: it needs workload kind 'trace'")
    if plan.max_in_flight < 1 or plan.rate_window_s <= 0:
        raise BenchError("max_in_flight must be >= 1 and rate_window_s > 0")
    if plan.requests_per_level is not None and plan.requests_per_level < 1:
        raise BenchError(f"requests_per_level must be >= 1 (or unset), got {plan.requests_per_level}")
    if plan.warmup_requests < 0:
        raise BenchError(f"warmup_requests must be >= 0, got {plan.warmup_requests}")
    if plan.request_timeout_s <= 0 or plan.level_timeout_s <= 0 or plan.min_duration_s < 0:
        raise BenchError("request_timeout_s and level_timeout_s must be > 0 and min_duration_s >= 0")
    if plan.min_windows < 1 or plan.max_windows < plan.min_windows:
        raise BenchError(
            f"windows: need 1 <= min_windows <= max_windows, got {plan.min_windows} and {plan.max_windows}"
        )
    if plan.target_rel_ci <= 0 or (plan.max_level_wall_s is not None and plan.max_level_wall_s <= 0):
        raise BenchError("target_rel_ci and max_level_wall_s (when set) must be > 0")
    try:
        check_metric_name(plan.precision_metric)
    except ValueError as exc:
        raise BenchError(f"precision_metric: {exc}") from exc
    if plan.precision_metric in ("server_accept_length", "failed", "requests"):
        raise BenchError(
            f"precision_metric {plan.precision_metric!r} is not a per-window figure; use e.g. output_tok_per_s"
        )


def check_plan(plan: BenchPlan) -> None:
    """Raise ``BenchError`` (one line) for a plan no server could run: bad levels or settings, a workload its kind
    cannot serve. ``arun_plan`` checks it first; a CLI checks it to tell bad input (exit 2) from a failed run."""
    _check_plan(plan)
    check_workload(plan.workload)


def _level_failure(what: str, run: _LevelRun, base_url: str) -> BenchError:
    errors = list(dict.fromkeys(s.error for s in run.samples if not s.ok))[:3]
    if run.server_gone:
        return BenchError(
            f"{what}: {base_url} stopped accepting connections (server is not running / crashed): {errors}"
        )
    return BenchError(f"{what}: every one of {len(run.samples)} requests failed: {errors}")


async def _measure_level(
    client: httpx.AsyncClient,
    source: RequestSource,
    plan: BenchPlan,
    load: Load,
    scale: float,
    clock: Clock,
    base_url: str,
    notes: list[str],
    virtual: bool = False,
) -> LevelSummary:
    """One level in independent windows, until ``window_stop_reason`` says enough (see ``BenchPlan``); an open-loop
    level also stops when a window was over-saturated (``autotune/bench/open_loop.py``)."""
    key = load.key
    c = load.concurrency
    windows: list[LevelSummary] = []
    runs: list[OpenRun] = []
    t_level = clock()
    source.mark()
    while True:
        what = f"load level {key} (window {len(windows) + 1})"
        if load.open_loop:
            if load.kind == "trace":
                source.align(trace_cycle(plan))
            units = source.take(units_for_open_level(plan, load))
            orun = await run_open_window(
                client, units, plan, load, len(windows), scale, clock, virtual, record=source.record
            )
            runs.append(orun)
            run = _LevelRun(orun.samples, orun.wall_s, orun.server_gone, orun.timed_out, orun.engine_s)
        else:
            run = await _run_level(
                client, source, plan, c, requests_for_level(plan, c), plan.min_duration_s, scale, clock, virtual
            )
        if run.server_gone or not any(s.ok for s in run.samples):
            raise _level_failure(what, run, base_url)
        if run.timed_out:
            notes.append(f"level {key} window {len(windows) + 1}: stopped at level_timeout_s={plan.level_timeout_s:g}")
        load_key = "" if not load.open_loop else str(key)
        windows.append(summarize_level(c, run.samples, run.engine_s, slo=plan.slo, load=load_key))
        reason = window_stop_reason(windows, plan, clock() - t_level)
        if runs and runs[-1].saturated:
            notes.append(f"level {key}: over-saturated, stopped: {runs[-1].saturated}")
            reason = "saturated"
        if reason is not None:
            extra: dict[str, object] = {"traffic": traffic_stats(source.sent)}
            if runs:
                extra["lateness"] = level_lateness(runs)
                extra["offered_rate"] = level_offered_rate(runs)
            return aggregate_windows(c, windows, reason, **extra)


async def arun_plan(
    base_url: str,
    plan: BenchPlan,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Clock = time.perf_counter,
    on_level: Callable[[int, int, Any], None] | None = None,
) -> BenchResult:
    """Measure every load level of ``plan`` on the server at ``base_url`` (``clock`` is a seam for tests).

    ``on_level(k, m, key)`` is called as level ``k`` (1-based) of ``m`` begins (progress reporting); ``key`` is the
    concurrency, or an open-loop level's key."""
    check_plan(plan)
    started = clock()
    source = RequestSource(plan.workload)
    source.prefetch(plan.warmup_requests)
    levels_planned = plan.levels()
    closed = [ld.concurrency for ld in levels_planned if not ld.open_loop]
    width = max([*closed, *(plan.max_in_flight for ld in levels_planned if ld.open_loop)]) + 8
    limits = httpx.Limits(max_connections=width, max_keepalive_connections=width)
    notes: list[str] = []
    levels: list[LevelSummary] = []
    if transport is None:
        transport = _default_transport(width)
    async with httpx.AsyncClient(
        base_url=base_url, transport=transport, timeout=plan.request_timeout_s, limits=limits, trust_env=False
    ) as client:
        info = await fetch_server_info(client, base_url)
        scale = info.time_scale
        if info.endpoint is None:
            notes.append("server answered neither /server_info nor /get_server_info: time scale 1.0 assumed")
        elif info.virtual_clock:
            notes.append("durations are engine seconds on the simulated server's virtual clock")
        elif scale != 1.0:
            notes.append(f"durations are engine seconds: wall x time_scale {scale:g} declared by the server")
        order: list[int | str] = []
        flushes = 0
        greedy = None
        if plan.greedy_prompts > 0:
            if plan.flush_cache:
                flushes += int(bool(await flush_cache(client, base_url)))
            greedy = await greedy_sample(client, plan.workload, plan.greedy_prompts, plan.greedy_max_new_tokens)
            if greedy.errors:
                notes.append(
                    f"greedy sample: {len(greedy.errors)} of {plan.greedy_prompts} prompts failed: {greedy.errors[0]}"
                )
        per_level_accept = True
        for k, load in enumerate(levels_planned, start=1):
            c = load.key
            if on_level is not None:
                on_level(k, len(levels_planned), c)
            if plan.flush_cache:
                flushed = await flush_cache(client, base_url)
                flushes += int(bool(flushed))
                if flushed is None and not any("flush_cache" in n for n in notes):
                    notes.append("server has no /flush_cache: levels ran without flushing the radix cache")
                elif flushed is False:
                    notes.append(f"level {c}: /flush_cache refused for {FLUSH_RETRY_S:g} s (server busy); not flushed")
            if plan.warmup_requests > 0:
                wc = min(plan.warmup_requests, load.concurrency if not load.open_loop else 4)
                run = await _run_level(
                    client, source, plan, wc, plan.warmup_requests, 0.0, scale, clock, info.virtual_clock
                )
                if run.server_gone or not any(s.ok for s in run.samples):
                    raise _level_failure(f"warmup before level {c}", run, base_url)
            reset = await reset_accept_counters(client)
            level = await _measure_level(client, source, plan, load, scale, clock, base_url, notes, info.virtual_clock)
            if reset:
                try:
                    level = replace(
                        level, server_accept_length=(await fetch_server_info(client, base_url)).accept_length
                    )
                except BenchError as exc:
                    notes.append(f"server_info after level {c}: {exc}")
            elif per_level_accept:
                per_level_accept = False
                notes.append("server did not confirm /set_internal_state: no per-level /server_info accept length")
            levels.append(level)
            order.append(c)
        counts = filter_counts(plan.workload)
        if counts is not None and counts.wrapped:
            notes.append(
                f"workload {plan.workload.kind}: the run needed more than the {counts.kept} entries that pass its "
                "filters, so later requests repeat earlier prompts (a prefix cache may serve them)"
            )
        try:
            after = await fetch_server_info(client, base_url)
        except BenchError as exc:
            after = ServerInfo()
            notes.append(f"server_info after the run: {exc}")
    return BenchResult(
        levels=tuple(levels),
        time_scale=scale,
        server_accept_length=after.accept_length,
        wall_s=clock() - started,
        notes=tuple(notes),
        level_order=tuple(order),
        cache_flushes=flushes,
        workload=_workload_info(plan),
        greedy=greedy,
    )


def _workload_info(plan: BenchPlan) -> dict[str, Any] | None:
    """The workload's kind, token rule and what its filters dropped (for the record and the report)."""
    from autotune.bench.workloads.tokens import token_counter

    spec = plan.workload
    if spec.kind in ("synthetic", "random-ids"):
        return None  # as before: nothing to say about random ids
    counts = filter_counts(spec)
    # a trace's prompts are token ids of the lengths its rows give: no text is counted
    rule = (
        "the trace's own lengths (prompts are token ids)"
        if spec.kind == "trace"
        else token_counter(spec.tokenizer).rule
    )
    info: dict[str, Any] = {"kind": spec.kind, "token_rule": rule}
    if counts is not None:
        info["kept"] = counts.kept
        info["dropped"] = dict(counts.dropped)
    return info


def run_plan(base_url: str, plan: BenchPlan, **kw: Any) -> BenchResult:
    """Synchronous wrapper of :func:`arun_plan` (starts its own event loop)."""
    return asyncio.run(arun_plan(base_url, plan, **kw))


# ----------------------------------------------------------------------------------------------------------- CLI


if __name__ == "__main__":
    from autotune.bench.cli import main

    sys.exit(main())
