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
    w.write(_chunk(b'data: {"text": "t", "meta_info\n\n'))  # cut-off JSON, then the stream goes on normally
    w.write(_chunk(_event(3, final=True)))
    w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await w.drain()


async def endless_line(n: int, w: asyncio.StreamWriter) -> None:
    w.write(_chunk(b'data: {"text": "'))
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
            yield data[i : i + 1]

    async def collect() -> list[str]:
        return [line async for line in sse_lines(gen(), max_line_bytes=64)]

    assert asyncio.run(collect()) == ['data: {"text": "é"}', "", "data: [DONE]"]

    async def too_long() -> list[str]:
        async def one() -> AsyncIterator[bytes]:
            yield b"x" * 65 + b"\n"

        return [line async for line in sse_lines(one(), max_line_bytes=64)]

    with pytest.raises(ValueError, match="more than 64"):
        asyncio.run(too_long())


def _lying(ct: int, prompt_tokens: int = 4):  # type: ignore[no-untyped-def]
    async def behaviour(n: int, w: asyncio.StreamWriter) -> None:
        w.write(_chunk(_event(1)))
        meta = {"completion_tokens": ct, "prompt_tokens": prompt_tokens, "finish_reason": {"type": "length"}}
        w.write(_chunk(b"data: " + json.dumps({"text": "t", "meta_info": meta}).encode() + b"\n\n"))
        w.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await w.drain()

    return behaviour


def test_a_server_claiming_300_million_tokens_is_a_failed_request_not_an_allocation() -> None:
    """Issue 28 case 6: a count taken from the server sized a list (``[gap] * 300000000``: gigabytes, MemoryError)."""
    import resource

    lie = _lying(300_000_000)

    async def mixed(n: int, w: asyncio.StreamWriter) -> None:
        await (complete, lie)[(n - 1) % 2](n, w)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    plan = BenchPlan(workload=SPEC, concurrencies=(1,), requests_per_level=2, warmup_requests=0)
    lv = run_against(mixed, plan).level(1)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 200, f"the client grew by {grown_mib:.0f} MiB"
    assert lv.failed >= 1 and lv.failed == lv.requests // 2
    assert any("300,000,000" in e and "completion_tokens" in e for e in lv.errors), lv.errors


@pytest.mark.parametrize(("ct", "prompt"), [(-5, 4), (3, -1)])
def test_a_negative_count_from_the_server_is_an_error(ct: int, prompt: int) -> None:
    plan = BenchPlan(workload=SPEC, concurrencies=(1,), requests_per_level=2, warmup_requests=0)

    async def mixed(n: int, w: asyncio.StreamWriter) -> None:
        await (complete, _lying(ct, prompt))[(n - 1) % 2](n, w)

    lv = run_against(mixed, plan).level(1)
    assert lv.failed >= 1 and lv.failed == lv.requests // 2, (lv.failed, lv.errors)
    assert any("negative" in e for e in lv.errors), lv.errors
