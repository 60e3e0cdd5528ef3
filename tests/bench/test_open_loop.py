"""Open-loop levels against a fake server: sends keep the schedule whatever the server does, no catch-up after the
client fell behind, over-saturation stops a level, and the plan's levels run in order on one server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from autotune.bench.client import run_plan
from autotune.bench.load import Load, arrival_times
from autotune.bench.open_loop import LATE_S, SHIFT_S, OpenRun, level_offered_rate
from autotune.bench.types import SLO, BenchPlan, Lateness, WorkloadSpec
from autotune.core.errors import BenchError

SPEC = WorkloadSpec(input_len=4, output_len=3, vocab_size=100, seed=3)


def sse(ct: int) -> bytes:
    return (
        b"data: "
        + json.dumps({"text": "x", "meta_info": {"completion_tokens": ct, "prompt_tokens": 4}}).encode()
        + b"\n\n"
    )


def slow_server(delay_s: float, arrivals: list[float], block: dict[int, float] | None = None) -> httpx.MockTransport:
    """Answers /generate after ``delay_s`` (asyncio: the client is free meanwhile); records each arrival time; request
    ``k`` of ``block`` blocks the event loop for that long (the client itself falls behind)."""

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/generate":
            return httpx.Response(404)
        arrivals.append(time.perf_counter())
        if block and len(arrivals) in block:
            time.sleep(block[len(arrivals)])

        async def body() -> AsyncIterator[bytes]:
            await asyncio.sleep(delay_s)
            for ct in (1, 2, 3):
                yield sse(ct)
            yield b"data: [DONE]\n\n"

        return httpx.Response(200, content=body())

    return httpx.MockTransport(handler)


def plan(load: Load, **kw: Any) -> BenchPlan:
    base: dict[str, Any] = {
        "workload": SPEC,
        "concurrencies": (),
        "loads": (load,),
        "warmup_requests": 0,
        "min_windows": 1,
        "max_windows": 1,
        "flush_cache": False,
    }
    return BenchPlan(**{**base, **kw})


def test_sends_keep_the_schedule_while_the_server_is_slow() -> None:
    arrivals: list[float] = []
    load = Load.at_rate(50.0)
    result = run_plan("http://fake", plan(load, requests_per_level=60), transport=slow_server(0.5, arrivals))
    lv = result.level("rate50")
    assert lv.requests == 60 and lv.failed == 0 and lv.concurrency == 0
    sched = arrival_times(load, 60, SPEC.seed, 0)
    got = np.asarray(arrivals) - arrivals[0]
    assert lv.lateness is not None
    # Each answer takes 0.5 s and the mean gap is 20 ms: a client that waited for answers would take 30 s (one at a
    # time) and at least 0.5 s per send; this one sends on the schedule, moved only by its own recorded lateness.
    assert got[-1] == pytest.approx(sched[-1] + lv.lateness.shift_s, abs=0.1)
    assert float(np.median(np.diff(got))) < 0.1
    assert lv.offered_rate == pytest.approx(59 / (sched[-1] + lv.lateness.shift_s))


def test_no_catch_up_after_the_client_fell_behind() -> None:
    arrivals: list[float] = []
    load = Load.at_rate(40.0)
    result = run_plan(
        "http://fake", plan(load, requests_per_level=40), transport=slow_server(0.05, arrivals, block={10: 0.6})
    )
    sched = arrival_times(load, 40, SPEC.seed, 0)
    got = np.asarray(arrivals) - arrivals[0]
    # Send 11 went out ~0.6 s late; the rest keep the schedule's gaps from there (shifted), not a burst to catch up:
    # a catch-up client would fire the ~24 sends due during the block back to back as it ends.
    bunched = int(np.sum((got > got[10] + 0.55) & (got < got[10] + 0.65)))
    assert bunched <= 8
    gaps_after, planned = np.diff(got[11:]), np.diff(sched[11:])
    assert float(np.median(gaps_after)) > 0.5 * float(np.median(planned))
    lv = result.level("rate40")
    assert lv.lateness is not None and lv.lateness.max_s > 0.5 and lv.lateness.late >= 1
    assert lv.lateness.shift_s >= 0.5
    assert LATE_S < SHIFT_S < 0.5


def test_a_levels_lateness_covers_every_window() -> None:
    # Window 1's send 11 blocks the client for 0.6 s; window 2 keeps its schedule. The level's lateness is over the
    # sends of both windows (it was window 2's alone: max ~0 s, late 0, shift 0).
    arrivals: list[float] = []
    p = plan(Load.at_rate(40.0), requests_per_level=20, min_windows=2, max_windows=2)
    result = run_plan("http://fake", p, transport=slow_server(0.01, arrivals, block={11: 0.6}))
    lv = result.level("rate40")
    assert len(lv.windows) == 2 and lv.lateness is not None
    assert lv.lateness.max_s > 0.5 and lv.lateness.late >= 1 and lv.lateness.shift_s >= 0.5


def test_an_over_saturated_level_stops_and_says_so() -> None:
    arrivals: list[float] = []
    p = plan(Load.at_rate(200.0), requests_per_level=100, max_in_flight=10)
    result = run_plan("http://fake", p, transport=slow_server(0.5, arrivals))
    lv = result.level("rate200")
    assert lv.stop_reason == "saturated" and lv.requests == 10
    assert any("over-saturated" in n and "max_in_flight 10" in n for n in result.notes)
    assert lv.traffic is not None and lv.traffic.requests == 10  # the requests sent, not the 100 the window took


def test_level_timeout_stops_an_open_loop_window_from_sending() -> None:
    # 8 sends at 2 req/s span 5.1 s (seed 3: at 0, 0.85, 0.93, 1.39, ...); a 1.2 s window limit stops the sending, as
    # it stops a closed loop, and the window ends there
    arrivals: list[float] = []
    t0 = time.perf_counter()
    result = run_plan(
        "http://fake",
        plan(Load.at_rate(2.0), requests_per_level=8, level_timeout_s=1.2),
        transport=slow_server(0.05, arrivals),
    )
    assert time.perf_counter() - t0 < 3.0
    assert result.level("rate2").requests == len(arrivals) == 3
    assert any("stopped at level_timeout_s=1.2" in n for n in result.notes)


def test_mixed_levels_run_in_order_with_goodput() -> None:
    arrivals: list[float] = []
    p = plan(
        Load.at_rate(100.0),
        loads=(Load.closed(2), Load.at_rate(100.0)),
        concurrencies=(2,),
        requests_per_level=6,
        slo=SLO(ttft_ms=10_000),
    )
    result = run_plan("http://fake", p, transport=slow_server(0.01, arrivals))
    assert result.level_order == (2, "rate100")
    assert [lv.key for lv in result.levels] == [2, "rate100"]
    assert all(lv.slo_attainment == 1.0 for lv in result.levels)


def test_a_trace_level_needs_the_trace_workload() -> None:
    with pytest.raises(BenchError, match="needs workload kind 'trace'"):
        run_plan("http://fake", plan(Load.replay()), transport=slow_server(0.0, []))


def test_rate_zero_is_refused() -> None:
    with pytest.raises(BenchError, match="rate must be a finite number > 0"):
        run_plan("http://fake", plan(Load.at_rate(0.0)), transport=slow_server(0.0, []))


def _window(sends: int, span_s: float) -> OpenRun:
    return OpenRun((), 1.0, False, False, 1.0, Lateness(0.0, 0.0, 0.0, 0, 0.0), "", 0.0, (), sends, span_s)


def test_a_levels_offered_rate_pools_its_windows() -> None:
    # A bursty rate of 0.2/s with two sends a window: one window's sends 1 ns apart, the other's 10 s apart. A mean of
    # the windows' own rates read 5e8 req/s; the level sent 2 units after its first ones over 10 s.
    assert level_offered_rate([_window(2, 1e-9), _window(2, 10.0)]) == pytest.approx(2 / 10.0)
    # a window of one send has no gap: it adds nothing, and a level of such windows has no offered rate
    assert level_offered_rate([_window(1, 0.0), _window(4, 1.5)]) == pytest.approx(2.0)
    assert level_offered_rate([_window(1, 0.0)]) is None


def test_traffic_counts_the_turns_sent_not_those_of_a_conversation_cut_short(tmp_path: Path) -> None:
    # The server refuses every turn after a conversation's first (its prompt is too long): each conversation ends at
    # its second turn, so 2 of its 4 turns are sent. The traffic summary counted all 4 (the turns handed out).
    convs = [
        {
            "conversations": [
                {"from": "human" if k % 2 == 0 else "gpt", "value": f"turn {k} of {i} " * 4} for k in range(8)
            ]
        }
        for i in range(20)
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(convs))

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/generate":
            return httpx.Response(404)
        if "Assistant: " in json.loads(request.content)["text"]:  # a later turn: its history is in the prompt
            return httpx.Response(400, text="too long")
        return httpx.Response(200, content=sse(1) + sse(2) + b"data: [DONE]\n\n")

    spec = WorkloadSpec(kind="multi-turn", path=str(path), fixed_output_len=2)
    p = plan(Load.at_rate(100.0), loads=(Load.closed(2), Load.at_rate(100.0)), concurrencies=(2,), requests_per_level=4)
    result = run_plan("http://fake", replace(p, workload=spec), transport=httpx.MockTransport(handler))
    for lv in result.levels:
        assert lv.requests == 8 and lv.failed == 4
        assert lv.traffic is not None and lv.traffic.requests == 8


def test_every_trace_window_replays_the_trace_from_its_first_row(tmp_path: Path) -> None:
    # Rows 0-3 arrive together, row 4 a second later (0.2 s at time scale 0.2). The warmups (3 requests each) and the
    # concurrency level (16) took 22 rows: each trace window began at row 2, the next cycle's rows 0-1 following
    # after a made-up gap (the burst of 4 was split).
    rows = [{"timestamp": 5000 + 1000 * (i == 4), "input_length": 10 + i, "output_length": 3} for i in range(5)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    sent: list[tuple[int, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path != "/generate":
            return httpx.Response(404)
        sent.append((len(json.loads(request.content)["input_ids"]), time.perf_counter()))
        return httpx.Response(200, content=sse(1) + sse(2) + sse(3) + b"data: [DONE]\n\n")

    spec = WorkloadSpec(kind="trace", path=str(path), trace_block_size=4)
    p = plan(Load.replay(0.2), loads=(Load.closed(1), Load.replay(0.2)), concurrencies=(1,), max_windows=2)
    result = run_plan(
        "http://fake",
        replace(p, workload=spec, warmup_requests=3, min_windows=2),
        transport=httpx.MockTransport(handler),
    )
    lv = result.level("trace0.2")
    assert len(lv.windows) == 2 and lv.requests == 10
    window_sends = sent[-10:]
    assert [n for n, _ in window_sends] == [10, 11, 12, 13, 14] * 2
    for w in (window_sends[:5], window_sends[5:]):
        assert w[3][1] - w[0][1] < 0.1 and w[4][1] - w[0][1] == pytest.approx(0.2, abs=0.1)


def test_a_trace_workload_does_not_claim_a_token_rule(tmp_path: Path) -> None:
    """A trace's prompts are ids of its rows' lengths; the record said they were counted by the simulator's chars/4
    rule, on a real server too (a trace study gets no tokenizer)."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"timestamp": 0, "input_length": 8, "output_length": 3}), encoding="utf-8")
    spec = WorkloadSpec(kind="trace", path=str(path))
    result = run_plan("http://fake", replace(plan(Load.replay()), workload=spec), transport=slow_server(0.0, []))
    assert (
        result.workload is not None
        and result.workload["token_rule"] == "the trace's own lengths (prompts are token ids)"
    )
