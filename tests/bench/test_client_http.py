"""The client's default transport (aiohttp under httpx) against a real local HTTP server speaking raw HTTP/1.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from autotune.bench.client import arun_plan
from autotune.bench.types import BenchPlan, BenchResult, WorkloadSpec
from autotune.core.errors import BenchError

Behaviour = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(ct: int, final: bool = False) -> bytes:
    meta = {"completion_tokens": ct, "prompt_tokens": 4, "finish_reason": {"type": "length"} if final else None}
    return b"data: " + json.dumps({"text": "t" * ct, "meta_info": meta}).encode() + b"\n\n"


async def complete(n: int, w: asyncio.StreamWriter) -> None:
    for ct in range(1, 4):
        w.write(_chunk(_event(ct, final=ct == 3)))
        await w.drain()
    w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def broken(n: int, w: asyncio.StreamWriter) -> None:
    w.write(_chunk(_event(1)))
    await w.drain()
    w.close()  # no terminating chunk: the body is incomplete


async def hang(n: int, w: asyncio.StreamWriter) -> None:
    await asyncio.Event().wait()


async def _serve(generate: Behaviour, info: dict[str, Any]) -> tuple[asyncio.Server, list[asyncio.StreamWriter]]:
    writers: list[asyncio.StreamWriter] = []
    count = {"generate": 0}

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            while not writer.is_closing():
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
                length = next(
                    (int(h.split(":")[1]) for h in head.split("\r\n") if h.lower().startswith("content-length")), 0
                )
                await reader.readexactly(length)
                if head.split()[1] == "/generate":
                    count["generate"] += 1
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                    )
                    await generate(count["generate"], writer)
                else:
                    body = json.dumps(info).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                    writer.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    return server, writers


def run_against(generate: Behaviour, plan: BenchPlan, info: dict[str, Any] | None = None) -> BenchResult:
    async def main() -> BenchResult:
        server, writers = await _serve(generate, info or {"internal_states": [{"avg_spec_accept_length": 1.5}]})
        port = server.sockets[0].getsockname()[1]
        try:
            return await arun_plan(f"http://127.0.0.1:{port}", plan)
        finally:
            server.close()
            for w in writers:
                w.close()

    return asyncio.run(main())


SPEC = WorkloadSpec(input_len=4, output_len=3, vocab_size=100)


def test_streams_through_the_default_transport_and_ignores_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")  # a proxy that does not exist: trust_env must be off
    plan = BenchPlan(
        workload=SPEC, concurrencies=(1, 4), requests_per_level=6, warmup_requests=1, min_windows=1, max_windows=1
    )
    result = run_against(complete, plan)
    assert [(lv.requests, lv.failed) for lv in result.levels] == [(6, 0), (6, 0)]
    lv = result.level(4)
    assert lv.itl_ms is not None and lv.itl_ms.count == 6 * 2
    assert lv.output_tok_per_s > 0 and result.server_accept_length == 1.5


def test_broken_stream_and_read_timeout_are_failed_samples() -> None:
    async def mixed(n: int, w: asyncio.StreamWriter) -> None:
        await (complete, broken, hang)[(n - 1) % 3](n, w)

    plan = BenchPlan(
        workload=SPEC,
        concurrencies=(1,),
        requests_per_level=3,
        warmup_requests=0,
        request_timeout_s=0.3,
        min_windows=1,
        max_windows=1,
    )
    lv = run_against(mixed, plan).level(1)
    assert (lv.requests, lv.failed) == (3, 2)
    assert any(e.startswith("broken stream: RemoteProtocolError") for e in lv.errors), lv.errors
    assert any(e.startswith("timeout after 0.3 s") for e in lv.errors), lv.errors


def test_every_stream_broken_raises() -> None:
    plan = BenchPlan(workload=SPEC, concurrencies=(2,), requests_per_level=2, warmup_requests=0)
    with pytest.raises(BenchError, match="every one of 2 requests failed.*broken stream"):
        run_against(broken, plan)
