"""The simulated engine's virtual clock: figures come from the model, not from the host or the time scale."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from autotune.bench.client import run_plan
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.virtual_clock import SEND_TIME_HEADER, parse_times
from autotune.sim.offline import build, run_closed_loop
from tests.sim.clock_harness import CONFIGS, busy_loops, measure, measure_flags, sim_server, worst_deviation

TOLERANCE = 0.01  # the bar: the same figures within 1%


def test_parse_times_reads_the_last_list_of_a_chunk() -> None:
    chunk = '{"text":" a b","meta_info":{"completion_tokens":2,"sim_arrival":0.5,"sim_times":[[0.75,1],[1.0,2]]}}'
    assert parse_times(chunk) == [(0.75, 1), (1.0, 2)]
    assert parse_times('{"meta_info":{"sim_times":[]}}') == []
    assert parse_times('{"meta_info":{"completion_tokens":2}}') is None
    with pytest.raises(ValueError, match="unterminated"):
        parse_times('{"meta_info":{"sim_times":[[0.75,1]')


def test_http_closed_loop_equals_the_offline_simulation() -> None:
    """Through HTTP and the benchmark client, a closed loop gives exactly the virtual-time simulation's figures."""
    flags = ["--model-path", "m", "--sim-noise", "0"]
    plan = BenchPlan(
        workload=WorkloadSpec(input_len=128, output_len=64),
        concurrencies=(8,),
        requests_per_level=24,
        warmup_requests=0,
        min_windows=1,
        max_windows=1,
    )
    with sim_server(["--sim-launch-speedup", "1000", "--sim-time-scale", "10", *flags]) as url:
        level = run_plan(url, plan).levels[0]
    offline = run_closed_loop(build(flags), 8, 24, 128, 64)
    assert level.requests == offline.requests == 24 and level.failed == 0
    assert level.output_tok_per_s == pytest.approx(offline.output_tok_per_s, rel=1e-9)
    assert level.duration_s == pytest.approx(offline.duration_s, rel=1e-9)
    assert level.ttft_ms is not None and level.tpot_ms is not None
    assert level.ttft_ms.mean == pytest.approx(1000 * offline.mean_ttft_s, rel=1e-9)
    assert level.tpot_ms.mean == pytest.approx(1000 * offline.mean_tpot_s, rel=1e-9)


def test_two_time_scales_give_the_same_figures() -> None:
    slow = measure(CONFIGS[0], time_scale=5.0)
    fast = measure(CONFIGS[0], time_scale=200.0)
    worst, where = worst_deviation(slow, fast)
    assert worst <= TOLERANCE, f"time scale 5 vs 200: {where} differs by {100 * worst:.3f}%"


SPEC = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/tmp/models/eagle3-llama-1b"]
SPEC += ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--sim-profile", "h200x2-llama-8b", "--dp-size", "2"], id="two-dp-replicas"),
        pytest.param(["--sim-profile", "h200-llama-1b", *SPEC], id="eagle3-sampled-acceptance"),
    ],
)
def test_time_scale_does_not_change_replicas_or_speculation(flags: list[str]) -> None:
    """Two DP replicas share the clock, and sampled acceptance follows the event order, not the host."""
    plan = BenchPlan(
        workload=WorkloadSpec(input_len=64, output_len=32, range_ratio=0.5),
        concurrencies=(3, 16),
        requests_per_level=16,
        warmup_requests=1,
        max_windows=2,
    )
    common = ["--sim-launch-speedup", "1000", "--model-path", "m", *flags]
    slow = measure_flags([*common, "--sim-time-scale", "5"], plan)
    fast = measure_flags([*common, "--sim-time-scale", "200"], plan)
    worst, where = worst_deviation(slow, fast)
    assert worst <= TOLERANCE, f"{flags}: time scale 5 vs 200: {where} differs by {100 * worst:.3f}%"


@pytest.mark.slow
def test_busy_host_gives_the_same_figures() -> None:
    """Smoke configurations at the study's load levels, idle and beside two busy loops: the same per-level figures.

    Marked slow: it spins two CPU-bound processes for the length of a measurement (~10-20 s on 2 cores).
    """
    idle = [measure(c, time_scale=10.0) for c in CONFIGS]
    with busy_loops(2):
        busy = [measure(c, time_scale=10.0) for c in CONFIGS]
    for config, a, b in zip(CONFIGS, idle, busy, strict=True):
        worst, where = worst_deviation(a, b)
        assert worst <= TOLERANCE, f"{config}: {where} idle {a[where]} vs busy {b[where]} ({100 * worst:.3f}%)"


def _stream(url: str, send_time: float | None) -> dict:
    headers = {} if send_time is None else {SEND_TIME_HEADER: repr(send_time)}
    body = {"input_ids": [1] * 32, "sampling_params": {"max_new_tokens": 8}, "stream": True}
    with httpx.stream("POST", f"{url}/generate", json=body, headers=headers, timeout=30) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: {")]
    return json.loads(lines[-1][len("data: ") :])["meta_info"]


def test_clock_waits_for_announced_requests_then_times_out() -> None:
    """Two announced requests sent 0.3 s (wall) apart join at the same virtual time; one that never comes is
    given up after the hold timeout (wall)."""
    flags = ["--sim-launch-speedup", "1000", "--model-path", "m", "--sim-noise", "0", "--sim-hold-timeout-s", "1"]
    with sim_server(flags) as url:
        assert httpx.post(f"{url}/sim/hold", json={"requests": "x"}).status_code == 400
        t0 = httpx.post(f"{url}/sim/hold", json={"requests": 2}).json()["now"]
        refused = httpx.post(f"{url}/generate", headers={SEND_TIME_HEADER: repr(t0)}, json={})
        assert refused.status_code == 400  # a bad body is refused and fills no announced slot
        metas: list[dict] = []
        th = threading.Thread(target=lambda: metas.append(_stream(url, t0)))
        th.start()
        time.sleep(0.3)
        metas.append(_stream(url, t0))
        th.join(timeout=30)
        assert [m["sim_arrival"] for m in metas] == [t0, t0]
        assert metas[0]["e2e_latency"] == metas[1]["e2e_latency"]  # batched together: the same timeline
        finish = max(m["sim_times"][-1][0] for m in metas)
        # both finished: the engine now expects two requests; release one, send none for the other
        httpx.post(f"{url}/sim/release", json={"requests": 1})
        started = time.monotonic()
        late = _stream(url, None)  # a request without a send time waits behind the announced one
        assert time.monotonic() - started >= 0.8
        assert late["sim_arrival"] == pytest.approx(finish)
        bad = httpx.post(f"{url}/generate", headers={SEND_TIME_HEADER: "soon"}, json={"input_ids": [1]})
        assert bad.status_code == 400 and SEND_TIME_HEADER in bad.text


def test_an_abandoned_request_does_not_stall_the_clock() -> None:
    """A protocol request the client drops mid-stream (a wall timeout) leaves nothing expected behind it."""
    flags = ["--sim-launch-speedup", "1000", "--model-path", "m", "--sim-hold-timeout-s", "60"]
    with sim_server(flags) as url:
        t0 = httpx.post(f"{url}/sim/hold", json={"requests": 1}).json()["now"]
        body = {"input_ids": [1] * 32, "sampling_params": {"max_new_tokens": 20000}, "stream": True}
        with httpx.stream("POST", f"{url}/generate", json=body, headers={SEND_TIME_HEADER: repr(t0)}) as r:
            next(r.iter_lines())  # the first token, then the client goes away
        started = time.monotonic()
        meta = _stream(url, None)
        assert time.monotonic() - started < 20, "the engine waited for the abandoned request's worker"
        assert meta["completion_tokens"] == 8
        assert httpx.get(f"{url}/server_info").json()["sim"]["now"] >= meta["sim_times"][-1][0]
