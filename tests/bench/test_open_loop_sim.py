"""Open-loop levels and conversations on the simulated server (a real process), on its virtual clock."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autotune.bench.client import run_plan
from autotune.bench.load import Load
from autotune.bench.types import SLO, BenchPlan, WorkloadSpec
from tests.bench.test_client_sim import _start, _stop


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    proc, url = _start()
    try:
        yield url
    finally:
        _stop(proc)


def test_rate_levels_on_the_virtual_clock(sim_url: str) -> None:
    spec = WorkloadSpec(kind="random", input_len=64, output_len=32)
    plan = BenchPlan(
        workload=spec,
        concurrencies=(1,),
        loads=(Load.closed(1), Load.at_rate(4), Load.at_rate(400)),
        requests_per_level=40,
        warmup_requests=1,
        max_windows=2,
        slo=SLO(ttft_ms=100),
    )
    result = run_plan(sim_url, plan)
    assert result.level_order == (1, "rate4", "rate400")
    low, high = result.level("rate4"), result.level("rate400")
    assert low.failed == 0 and high.failed == 0
    assert low.lateness is not None and low.lateness.max_s == 0.0  # the virtual clock: sends exactly on schedule
    assert low.offered_rate == pytest.approx(4, rel=0.5)
    # A light load finishes each request before the next arrives: the completion rate follows the offered rate.
    assert low.request_per_s == pytest.approx(low.offered_rate, rel=0.35)
    assert high.ttft_ms is not None and low.ttft_ms is not None and high.ttft_ms.median > low.ttft_ms.median
    assert low.slo_attainment == 1.0 and high.goodput is not None
    assert low.traffic is not None and low.traffic.requests == low.requests


def test_multi_turn_conversations_on_the_sim(sim_url: str, tmp_path: Path) -> None:
    convs = [
        {
            "conversations": [
                {"from": "human" if k % 2 == 0 else "gpt", "value": f"turn {k} of {i} " * 6} for k in range(6)
            ]
        }
        for i in range(30)
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(convs))
    spec = WorkloadSpec(kind="multi-turn", path=str(path), think_time_s=0.5)
    plan = BenchPlan(
        workload=spec,
        concurrencies=(2,),
        loads=(Load.closed(2), Load.at_rate(2)),
        requests_per_level=4,
        warmup_requests=0,
        min_windows=2,
        max_windows=2,
    )
    result = run_plan(sim_url, plan)
    for lv in result.levels:
        assert lv.failed == 0 and lv.requests == 2 * 4 * 3  # two windows of four conversations of three turns
        assert lv.traffic is not None and lv.traffic.prefix_reuse > 0.3
        assert lv.e2e_ms is not None
    assert result.workload is not None and result.workload["kind"] == "multi-turn"


def test_trace_replay_at_its_own_times_on_the_sim(sim_url: str, tmp_path: Path) -> None:
    rows = [
        {"timestamp": 250 * i, "input_length": 40 + i, "output_length": 8, "hash_ids": [i % 3, 100 + i]}
        for i in range(12)
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    spec = WorkloadSpec(kind="trace", path=str(path), trace_block_size=16)
    plan = BenchPlan(
        workload=spec,
        concurrencies=(1,),
        loads=(Load.closed(1), Load.replay(0.5)),
        warmup_requests=0,
        min_windows=2,
        max_windows=2,
    )
    result = run_plan(sim_url, plan)
    lv = result.level("trace0.5")
    assert lv.failed == 0 and lv.requests == 2 * 12  # a window replays the whole trace
    # 12 rows 0.25 s apart, replayed twice as fast: 11 gaps of 0.125 s (virtual clock: sent exactly then)
    assert lv.offered_rate == pytest.approx(11 / (11 * 0.125))
    assert lv.traffic is not None and lv.traffic.prefix_reuse > 0.1  # hash ids 0-2 repeat their blocks


def test_a_rate_the_sim_keeps_up_with_measures_every_window(sim_url: str) -> None:
    """60 req/s of short requests (about one in flight): 600 sends a window, more than ``max_in_flight`` (512). The
    sends go out ahead of the engine in wall time; only requests in flight on the virtual clock count."""
    plan = BenchPlan(
        workload=WorkloadSpec(kind="random", input_len=64, output_len=8),
        concurrencies=(1,),
        loads=(Load.at_rate(60),),
        warmup_requests=0,
        min_windows=2,
        max_windows=2,
        rate_window_s=10.0,
    )
    result = run_plan(sim_url, plan)
    lv = result.level("rate60")
    assert lv.stop_reason == "max_windows" and len(lv.windows) == 2
    assert lv.requests == 2 * 600 and lv.failed == 0
    assert not any("saturated" in n for n in result.notes)


def test_a_rate_far_above_the_sim_stops_as_saturated(sim_url: str) -> None:
    """20000 req/s of the same requests: the server's queue grows with every send, so the window stops when 32
    requests are in flight at a virtual send time; the clock then goes on (the next plan is not held up)."""
    plan = BenchPlan(
        workload=WorkloadSpec(kind="random", input_len=64, output_len=8),
        concurrencies=(1,),
        loads=(Load.at_rate(20000),),
        warmup_requests=0,
        max_in_flight=32,
        rate_window_s=0.1,
    )
    result = run_plan(sim_url, plan)
    lv = result.level("rate20000")
    assert lv.stop_reason == "saturated" and len(lv.windows) == 1
    assert lv.requests == 32 and lv.failed == 0  # none finishes within the 32 sends' 1.6 ms
    assert any(
        "32 requests in flight at the virtual send time (max_in_flight 32) after 32 of 2000 sends" in n
        for n in result.notes
    )
    started = time.monotonic()
    after = run_plan(
        sim_url, BenchPlan(workload=plan.workload, concurrencies=(1,), requests_per_level=4, warmup_requests=0)
    )
    assert after.levels[0].failed == 0 and time.monotonic() - started < 10
