"""The streaming client against httpx.MockTransport: SSE parsing, time scaling, failures, load-level mechanics."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from autotune.bench.cli import main
from autotune.bench.client import arun_plan, run_plan
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.errors import BenchError

SPEC = WorkloadSpec(input_len=4, output_len=5, vocab_size=100, seed=3)


class FakeClock:
    """Time that moves only when the fake server says so: chunk timings are exact."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def sse(meta: dict[str, Any], text: str = "x") -> bytes:
    return b"data: " + json.dumps({"text": text, "meta_info": meta}).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
Handler = Callable[[httpx.Request], Any]


def server(
    generate: Handler, info: dict[str, Any] | None = None, info_path: str = "/server_info"
) -> httpx.MockTransport:
    """A fake SGLang server: ``info`` at ``info_path`` (404 elsewhere), ``generate`` answers POST /generate."""
    info = {"internal_states": [{}]} if info is None else info

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/generate":
            result = generate(request)
            return await result if asyncio.iscoroutine(result) else result
        if request.url.path == info_path:
            return httpx.Response(200, json=info)
        return httpx.Response(404, json={"detail": "Not Found"})

    return httpx.MockTransport(handler)


def streamed(chunks: list[bytes]) -> Handler:
    def generate(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

        return httpx.Response(200, content=body())

    return generate


def good_stream(n_tokens: int = 3) -> Handler:
    return streamed([*(sse({"completion_tokens": i, "prompt_tokens": 4}) for i in range(1, n_tokens + 1)), DONE])


def plan(**kw: Any) -> BenchPlan:
    base: dict[str, Any] = {
        "workload": SPEC,
        "concurrencies": (1,),
        "warmup_requests": 0,
        "requests_per_level": 1,
        "min_windows": 1,
        "max_windows": 1,
    }  # one window: these tests check its mechanics
    return BenchPlan(**{**base, **kw})


def run(transport: httpx.MockTransport, p: BenchPlan, **kw: Any) -> Any:
    return run_plan("http://sim", p, transport=transport, **kw)


@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_sse_timings_tokens_and_accept_length(scale: float) -> None:
    clock = FakeClock()

    script = [
        (0.5, sse({"completion_tokens": 1, "prompt_tokens": 4, "finish_reason": None})),
        (0.1, sse({"completion_tokens": 2, "prompt_tokens": 4, "finish_reason": None})),
        (0.2, sse({"completion_tokens": 4, "prompt_tokens": 4, "finish_reason": None})),  # 2 tokens in one chunk
        (0.1, sse({"completion_tokens": 4, "prompt_tokens": 4, "finish_reason": None})),  # no new token: no ITL
        (
            0.3,
            sse({"completion_tokens": 5, "prompt_tokens": 4, "spec_verify_ct": 2, "finish_reason": {"type": "length"}}),
        ),
        (0.05, DONE),
    ]

    def generate(request: httpx.Request) -> httpx.Response:
        async def body() -> AsyncIterator[bytes]:
            for dt, chunk in script:
                clock.t += dt
                yield chunk

        return httpx.Response(200, content=body())

    info = {"sim": {"time_scale": scale}, "internal_states": [{"avg_spec_accept_length": 2.25}]}
    result = run(server(generate, info), plan(), clock=clock)
    lv = result.level(1)
    assert result.time_scale == scale and result.server_accept_length == 2.25
    assert (lv.requests, lv.failed) == (1, 0)
    assert lv.ttft_ms is not None and lv.ttft_ms.mean == pytest.approx(500.0 * scale)
    assert lv.e2e_ms is not None and lv.e2e_ms.mean == pytest.approx(1250.0 * scale)  # up to [DONE]
    # ITL: 0.1; 0.2 spread over 2 tokens; the empty chunk's 0.1 joins the next gap: 0.4
    assert lv.itl_ms is not None and lv.itl_ms.count == 4
    assert lv.itl_ms.mean == pytest.approx(1000 * scale * (0.1 + 0.1 + 0.1 + 0.4) / 4)
    assert lv.itl_ms.p99 == pytest.approx(1000 * scale * (0.1 + 0.97 * 0.3))  # index 0.99 * 3
    assert lv.tpot_ms is not None and lv.tpot_ms.mean == pytest.approx(1000 * scale * 0.75 / 4)
    assert lv.accept_length == pytest.approx(2.5)
    assert lv.duration_s == pytest.approx(1.25 * scale)
    assert lv.output_tok_per_s == pytest.approx(5 / (1.25 * scale))
    assert lv.input_tok_per_s == pytest.approx(4 / (1.25 * scale))
    if scale != 1.0:
        assert any("time_scale 10" in n for n in result.notes)


def test_a_request_without_verify_steps_has_no_accept_length() -> None:
    # A one-token answer under speculation came from prefill: spec_verify_ct 0 (the simulator then also says
    # spec_accept_length 1.0). It carries no accept length: the level's is 5 tokens / 2 steps of the other request,
    # not (1 + 5) / (1 + 2) = 2.0; a level of only such requests has none (it was 1.0, a "broken drafter" value).
    one = sse({"completion_tokens": 1, "prompt_tokens": 4, "spec_verify_ct": 0, "spec_accept_length": 1.0})
    five = [sse({"completion_tokens": i, "prompt_tokens": 4}) for i in range(1, 5)]
    five.append(sse({"completion_tokens": 5, "prompt_tokens": 4, "spec_verify_ct": 2, "spec_accept_length": 2.5}))
    answers = iter([[one, DONE], [*five, DONE]])
    lv = run(server(lambda r: streamed(next(answers))(r)), plan(requests_per_level=2)).level(1)
    assert lv.failed == 0 and lv.accept_length == pytest.approx(2.5)
    lv = run(server(streamed([one, DONE])), plan()).level(1)
    assert lv.failed == 0 and lv.accept_length is None


def test_request_body_and_distinct_prompts_across_levels() -> None:
    bodies: list[dict[str, Any]] = []
    ok = good_stream()

    def generate(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return ok(request)

    p = plan(concurrencies=(1, 4), requests_per_level=None, rounds=2, min_requests=3, warmup_requests=2)
    result = run(server(generate), p)
    assert [lv.requests for lv in result.levels] == [3, 8]  # max(min_requests, c * rounds)
    assert len(bodies) == (2 + 3) + (2 + 8)  # warmup before each level
    assert bodies[0]["sampling_params"] == {"max_new_tokens": 5, "ignore_eos": True, "temperature": 0.0}
    assert bodies[0]["stream"] is True and "text" not in bodies[0]
    assert len({tuple(b["input_ids"]) for b in bodies}) == len(bodies)
    assert all(len(b["input_ids"]) == 4 for b in bodies)


def test_text_prompts_are_sent_as_text(tmp_path: Any) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "hi there", "max_new_tokens": 7}\n', encoding="utf-8")
    bodies: list[dict[str, Any]] = []
    ok = good_stream()

    def generate(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return ok(request)

    run(server(generate), plan(workload=WorkloadSpec(kind="jsonl", path=str(path), ignore_eos=False)))
    assert bodies == [
        {
            "text": "hi there",
            "sampling_params": {"max_new_tokens": 7, "ignore_eos": False, "temperature": 0.0},
            "stream": True,
        }
    ]


def test_a_dataset_that_runs_out_says_its_prompts_repeat(tmp_path: Any) -> None:
    """3 conversations for 2 levels of 4 requests: the later requests repeat earlier prompts (a prefix cache serves
    them), which no note of the run said (only the fidelity tool read the pool's ``wrapped`` flag)."""
    convs = [{"conversations": [{"value": f"question {i} " * 4}, {"value": "answer " * 8}]} for i in range(3)]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    spec = WorkloadSpec(kind="sharegpt", path=str(path))
    result = run(server(good_stream()), plan(workload=spec, concurrencies=(1, 2), requests_per_level=4))
    assert any("more than the 3 entries that pass its filters" in n and "repeat" in n for n in result.notes)
    small = run(server(good_stream()), plan(workload=replace(spec, seed=1), requests_per_level=3))
    assert not any("repeat" in n for n in small.notes)


def test_min_duration_is_engine_seconds() -> None:
    clock = FakeClock()

    calls = {"n": 0}
    counted = good_stream()

    def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        clock.t += 1.0  # each request takes 1 wall second
        return counted(request)

    for scale, expected in [(1.0, 10), (2.0, 5)]:
        calls["n"] = 0
        info = {"sim": {"time_scale": scale}}
        p = plan(requests_per_level=2, min_duration_s=10.0, warmup_requests=1)
        result = run(server(generate, info), p, clock=clock)
        assert result.level(1).requests == expected
        assert result.level(1).duration_s == pytest.approx(10.0)
        assert calls["n"] == 1 + expected  # the warmup is not stretched to min_duration_s


def test_min_duration_keeps_every_worker_when_requests_per_level_is_below_the_concurrency() -> None:
    # requests_per_level 1 at concurrency 4 with a min_duration: the 3 workers past the count must not drop out before
    # the first answer came back, or the level runs at concurrency 1 for its whole duration
    running = {"now": 0, "peak": 0}

    async def generate(request: httpx.Request) -> httpx.Response:
        running["now"] += 1
        running["peak"] = max(running["peak"], running["now"])
        await asyncio.sleep(0.02)
        running["now"] -= 1
        return good_stream()(request)

    lv = run(server(generate), plan(concurrencies=(4,), requests_per_level=1, min_duration_s=0.2)).level(4)
    assert running["peak"] == 4 and lv.requests >= 8 and lv.failed == 0


def test_get_server_info_fallback_and_missing_info() -> None:
    info = {"internal_states": [{"avg_spec_accept_length": 3.5}]}
    result = run(server(good_stream(), info, info_path="/get_server_info"), plan())
    assert result.server_accept_length == 3.5 and result.time_scale == 1.0
    result = run(server(good_stream(), info, info_path="/elsewhere"), plan())
    assert result.server_accept_length is None and any("neither /server_info" in n for n in result.notes)


def test_invalid_time_scale_is_rejected() -> None:
    with pytest.raises(BenchError, match="time_scale"):
        run(server(good_stream(), {"sim": {"time_scale": 0}}), plan())


def test_some_failed_requests_are_samples_not_exceptions() -> None:
    calls = {"n": 0}
    ok = good_stream()

    def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(500, text="engine overloaded") if calls["n"] % 2 == 0 else ok(request)

    lv = run(server(generate), plan(requests_per_level=6)).level(1)
    assert (lv.requests, lv.failed) == (6, 3)
    assert lv.errors == ("HTTP 500: engine overloaded",)
    assert lv.output_tok_per_s > 0 and lv.ttft_ms is not None and lv.ttft_ms.count == 3


class BrokenStream(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield sse({"completion_tokens": 1})
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


@pytest.mark.parametrize(
    ("generate", "error"),
    [
        (lambda r: httpx.Response(500, text="boom"), "HTTP 500: boom"),
        (lambda r: httpx.Response(200, stream=BrokenStream()), "broken stream: RemoteProtocolError"),
        (streamed([sse({"completion_tokens": 1})]), "ended before [DONE]"),
        (
            streamed([sse({"completion_tokens": 1}), b'data: {"error": {"message": "bad input"}}\n\n', DONE]),
            "bad input",
        ),
        (streamed([sse({"completion_tokens": 1, "finish_reason": {"type": "abort", "message": "oom"}}), DONE]), "oom"),
        (streamed([b"data: {not json\n\n", DONE]), "malformed stream chunk"),
        (streamed([DONE]), "no tokens"),
    ],
)
def test_every_request_failing_raises_with_the_error(generate: Handler, error: str) -> None:
    with pytest.raises(BenchError, match="load level 1 \\(window 1\\): every one of 2 requests failed") as exc:
        run(server(generate), plan(requests_per_level=2))
    assert error in str(exc.value)


def test_finished_stream_without_done_is_accepted() -> None:
    gen = streamed([sse({"completion_tokens": 1}), sse({"completion_tokens": 2, "finish_reason": {"type": "length"}})])
    assert run(server(gen), plan()).level(1).failed == 0


def test_request_timeout_is_a_failed_sample() -> None:
    calls = {"n": 0}
    ok = good_stream()

    async def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 2:
            await asyncio.Event().wait()  # hangs until the client gives up
        return ok(request)

    lv = run(server(generate), plan(requests_per_level=3, request_timeout_s=0.2)).level(1)
    assert (lv.requests, lv.failed) == (3, 1) and "timeout after 0.2 s" in lv.errors[0]


def test_httpx_timeout_is_a_failed_sample() -> None:
    def generate(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("read timed out", request=request)

    with pytest.raises(BenchError, match="timeout after"):
        run(server(generate), plan())


def test_level_timeout_marks_in_flight_requests_failed() -> None:
    calls = {"n": 0}
    ok = good_stream()

    async def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            await asyncio.Event().wait()
        return ok(request)

    result = run(server(generate), plan(concurrencies=(2,), requests_per_level=4, level_timeout_s=0.3))
    lv = result.level(2)
    assert (lv.requests, lv.failed) == (4, 1) and lv.errors == ("level timeout after 0.3 s",)
    assert any("level_timeout_s" in n for n in result.notes)


def test_after_a_timeout_on_the_virtual_clock_a_request_is_timed_from_where_it_joined() -> None:
    # The simulated engine goes on without a request the client abandoned (a wall timeout); the worker's next request
    # joins at the engine's current time (sim_arrival 10.0), not at the worker's stale send time 0.0
    calls = {"n": 0}

    def chunk(ct: int, t: float) -> bytes:
        return sse({"completion_tokens": ct, "prompt_tokens": 4, "sim_arrival": 10.0, "sim_times": [[t, ct]]})

    async def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] == 1:
            await asyncio.Event().wait()  # the client gives up on this one
        return streamed([chunk(1, 10.5), chunk(2, 10.6), DONE])(request)

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/generate":
            return await generate(request)
        if request.url.path == "/server_info":
            return httpx.Response(200, json={"sim": {"time_scale": 1.0, "clock": "virtual"}})
        if request.url.path.startswith("/sim/"):
            return httpx.Response(200, json={"now": 0.0, "expected": 1})
        return httpx.Response(404)

    lv = run(httpx.MockTransport(handler), plan(requests_per_level=2, request_timeout_s=0.2)).level(1)
    assert (lv.requests, lv.failed) == (2, 1)
    assert lv.ttft_ms is not None and lv.ttft_ms.mean == pytest.approx(500.0)
    assert lv.e2e_ms is not None and lv.e2e_ms.mean == pytest.approx(600.0)


def test_connection_refused_before_measuring() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BenchError, match="server is not running / crashed"):
        run_plan(f"http://127.0.0.1:{port}", plan(request_timeout_s=5))


def test_server_crash_mid_level_stops_and_raises() -> None:
    calls = {"n": 0}
    ok = good_stream()

    def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        if calls["n"] > 3:
            raise httpx.ConnectError("[Errno 111] Connection refused", request=request)
        return ok(request)

    with pytest.raises(BenchError, match="load level 1 \\(window 1\\): .*stopped accepting connections"):
        run(server(generate), plan(requests_per_level=50, min_duration_s=60))
    assert calls["n"] == 4  # nothing issued after the refusal


def test_failing_server_is_not_hammered_for_min_duration() -> None:
    calls = {"n": 0}

    def generate(request: httpx.Request) -> httpx.Response:
        calls["n"] += 1
        return httpx.Response(503, text="starting")

    with pytest.raises(BenchError, match="warmup before level 1: every one of 2"):
        run(server(generate), plan(warmup_requests=2, requests_per_level=4, min_duration_s=3600))
    assert calls["n"] == 2


def test_arun_plan_rejects_bad_plans() -> None:
    with pytest.raises(BenchError, match="concurrencies"):
        asyncio.run(arun_plan("http://sim", plan(concurrencies=()), transport=server(good_stream())))
    with pytest.raises(BenchError, match="warmup_requests must be >= 0, got -1"):
        asyncio.run(arun_plan("http://sim", plan(warmup_requests=-1), transport=server(good_stream())))


def test_cli_prints_a_table(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import autotune.bench.cli as client

    transport = server(good_stream())
    monkeypatch.setattr(client, "run_plan", lambda url, p: run(transport, p))
    assert main(["--url", "http://sim", "--concurrency", "1,2", "--repeats", "2", "--requests", "2"]) == 0
    out = capsys.readouterr().out
    assert "out_tok/s" in out and "spread%" in out and out.count("== run") == 2
    assert main(["--url", "http://sim", "--concurrency", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[0]["levels"][0]["concurrency"] == 1
    assert main(["--concurrency", "a,b"]) == 2
    assert main(["--url", "http://sim", "--repeats", "0"]) == 2  # not quietly run once
    assert "--repeats must be 1 or more, got 0" in capsys.readouterr().err
    assert main(["--url", "http://sim", "--slo", "ttft_ms=-1"]) == 2
    assert "SLO ttft_ms must be above 0 ms" in capsys.readouterr().err
    for url in ("127.0.0.1:30000", "localhost:30000", "ftp://sim"):  # not "server is not running / crashed"
        assert main(["--url", url]) == 2, url
        assert f"--url must be http://HOST:PORT or https://..., got {url!r}" in capsys.readouterr().err


def test_cli_tells_a_plan_it_cannot_run_from_a_failed_benchmark(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plan no server could run is bad input (exit 2, as the other CLIs' bad values), before any request; a
    benchmark that fails against the server is exit 1."""
    import autotune.bench.cli as client

    sent = {"n": 0}

    def generate(request: httpx.Request) -> httpx.Response:
        sent["n"] += 1
        return httpx.Response(503, text="starting")

    transport = server(generate)
    monkeypatch.setattr(client, "run_plan", lambda url, p: run(transport, p))
    for bad in (["--windows", "3,2"], ["--requests", "0"], ["--rate", "0"], ["--kind", "trace"]):
        assert main(["--url", "http://sim", "--concurrency", "1", *bad]) == 2, bad
        assert "cannot run this plan" in capsys.readouterr().err
    assert sent["n"] == 0
    assert main(["--url", "http://sim", "--concurrency", "1"]) == 1
    assert "benchmark failed" in capsys.readouterr().err and sent["n"] > 0
