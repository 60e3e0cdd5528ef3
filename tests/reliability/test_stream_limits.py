"""Partial cases of the failure matrix: the bench client bounds a stream line and rejects a malformed chunk."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from autotune.bench.stream import MAX_LINE_BYTES, sse_lines
from autotune.bench.types import BenchPlan
from tests.bench.test_client_http import SPEC, _chunk, _event, complete, run_against


async def malformed_mid_stream(n: int, w: asyncio.StreamWriter) -> None:
    w.write(_chunk(_event(1)))
    w.write(_chunk(b"data: {\"text\": \"t\", \"meta_info\n\n"))  # cut-off JSON, then the stream goes on normally
    w.write(_chunk(_event(3, final=True)))
    w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await w.drain()


async def endless_line(n: int, w: asyncio.StreamWriter) -> None:
    w.write(_chunk(b"data: {\"text\": \""))
    block = _chunk(b"x" * 65536)
    try:
        for _ in range(4 * MAX_LINE_BYTES // 65536):  # 4x the cap, never a newline
            w.write(block)
            await w.drain()
    except ConnectionError:
        return  # the client hung up: what it should do


def test_malformed_chunk_mid_stream_fails_the_request() -> None:
    async def mixed(n: int, w: asyncio.StreamWriter) -> None:
        await (complete, malformed_mid_stream)[(n - 1) % 2](n, w)

    plan = BenchPlan(workload=SPEC, concurrencies=(1,), requests_per_level=2, warmup_requests=0)
    lv = run_against(mixed, plan).level(1)
    assert lv.failed >= 1 and lv.failed == lv.requests // 2  # every second request, and only those
    assert any(e.startswith("malformed stream chunk") for e in lv.errors), lv.errors


def test_a_line_without_end_is_capped_and_fails_the_request() -> None:
    async def mixed(n: int, w: asyncio.StreamWriter) -> None:
        await (complete, endless_line)[(n - 1) % 2](n, w)

    plan = BenchPlan(workload=SPEC, concurrencies=(1,), requests_per_level=2, warmup_requests=0, request_timeout_s=30)
    lv = run_against(mixed, plan).level(1)
    assert lv.failed >= 1 and lv.failed == lv.requests // 2
    assert any("without a newline" in e for e in lv.errors), lv.errors


def test_sse_lines_splits_across_chunks_and_keeps_utf8() -> None:
    async def gen() -> AsyncIterator[bytes]:
        data = ("data: " + json.dumps({"text": "é"}, ensure_ascii=False) + "\r\n\r\ndata: [DONE]\n").encode()
        for i in range(len(data)):
            yield data[i:i + 1]

    async def collect() -> list[str]:
        return [line async for line in sse_lines(gen(), max_line_bytes=64)]

    assert asyncio.run(collect()) == ['data: {"text": "é"}', "", "data: [DONE]"]

    async def too_long() -> list[str]:
        async def one() -> AsyncIterator[bytes]:
            yield b"x" * 65 + b"\n"
        return [line async for line in sse_lines(one(), max_line_bytes=64)]

    with pytest.raises(ValueError, match="more than 64"):
        asyncio.run(too_long())
