"""One streamed ``POST /generate`` request, timed: its body, the SSE lines, and the sample it becomes (TTFT, inter-token
gaps, e2e, accept length), in wall time x the time scale or on a simulated server's virtual clock."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from autotune.bench.sim_clock import VirtualSlot, VirtualTiming
from autotune.bench.types import RequestSample, WorkloadSpec
from autotune.bench.workloads.base import BenchRequest
from autotune.core.virtual_clock import META_ARRIVAL, parse_times

Clock = Callable[[], float]
_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


def request_body(req: BenchRequest, spec: WorkloadSpec) -> bytes:
    payload: dict[str, Any] = {"input_ids": req.input_ids} if req.input_ids is not None else {"text": req.text}
    payload["sampling_params"] = {
        "max_new_tokens": req.max_new_tokens,
        "ignore_eos": spec.ignore_eos,
        "temperature": spec.temperature,
    }
    payload["stream"] = True
    return json.dumps(payload).encode()


def failed_sample(error: str) -> RequestSample:
    return RequestSample(ok=False, error=error[:300])


_CT_KEY = '"completion_tokens":'
# Slack over a request's max_new_tokens before a server's token count is refused (a speculative step may report its
# whole draft before the engine cuts it back to the limit).
COUNT_SLACK = 64
MAX_COMPLETION_TOKENS = 1 << 20  # the bound when a request body names no max_new_tokens


class ImplausibleCount(ValueError):
    """A count the server reported that no real server sends (negative, or more tokens than were asked for)."""


def _completion_tokens(payload: str) -> int | None:
    """``meta_info.completion_tokens`` of one SSE chunk, read without parsing the (cumulative) JSON."""
    i = payload.rfind(_CT_KEY)
    if i < 0:
        return None
    j = i + len(_CT_KEY)
    while j < len(payload) and payload[j] == " ":
        j += 1
    k = j + 1 if payload.startswith("-", j) else j
    while k < len(payload) and k - j < 20 and payload[k].isdigit():
        k += 1
    return int(payload[j:k]) if k > j and payload[j:k] != "-" else None


def token_limit(body: bytes) -> int:
    """The most completion tokens a request may be answered with: its ``max_new_tokens`` plus ``COUNT_SLACK``."""
    try:
        asked = json.loads(body).get("sampling_params", {}).get("max_new_tokens")
    except (ValueError, AttributeError):
        asked = None
    return int(asked) + COUNT_SLACK if isinstance(asked, int) and asked >= 0 else MAX_COMPLETION_TOKENS


def check_count(name: str, value: Any, limit: int | None = None) -> None:
    """Raise ImplausibleCount for a count from the server that is not an integer in ``[0, limit]``: every count is
    bounded before it sizes anything."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImplausibleCount(f"the server reported {name} = {value!r}, not a number")
    if value < 0:
        raise ImplausibleCount(f"the server reported a negative {name} ({value})")
    if limit is not None and value > limit:
        raise ImplausibleCount(
            f"the server reported {name} = {value:,}, more than the {limit:,} this request allows "
            f"(max_new_tokens + {COUNT_SLACK})"
        )


MAX_LINE_BYTES = 4 * 1024 * 1024  # an SSE line longer than this fails the request (SGLang's longest are ~1-2 MB)


async def sse_lines(chunks: AsyncIterator[bytes], max_line_bytes: int = MAX_LINE_BYTES) -> AsyncIterator[str]:
    """The lines of a byte stream (``\\n`` or ``\\r\\n``), decoded as UTF-8; raises ValueError when a line grows past
    ``max_line_bytes`` without its newline, so a server that never ends a line cannot fill the client's memory."""
    buf = b""
    async for data in chunks:
        buf = buf + data if buf else data
        if b"\n" in data:
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                if len(raw) > max_line_bytes:
                    raise ValueError(f"a stream line of {len(raw):,} bytes (more than {max_line_bytes:,})")
                yield raw.rstrip(b"\r").decode("utf-8", "replace")
        if len(buf) > max_line_bytes:
            raise ValueError(f"a stream line grew past {max_line_bytes:,} bytes without a newline")
    if buf:
        yield buf.rstrip(b"\r").decode("utf-8", "replace")


async def _stream_one(
    client: httpx.AsyncClient, body: bytes, scale: float, clock: Clock, slot: VirtualSlot | None = None
) -> RequestSample:
    """Send one streamed /generate request and time its chunks: on the server's virtual clock when ``slot`` is given
    (the slot then moves to the request's virtual finish), else in wall time x ``scale``."""
    virtual = VirtualTiming(slot.t) if slot is not None else None
    limit = token_limit(body)
    headers = {**_HEADERS, **slot.headers()} if slot is not None else _HEADERS
    t0 = clock()
    last_t = t0
    end_t: float | None = None
    ttft: float | None = None
    last_ct = 0
    itl: list[float] = []
    last_payload = ""
    done = False
    async with client.stream("POST", "/generate", content=body, headers=headers) as resp:
        if resp.status_code != 200:
            detail = (await resp.aread()).decode("utf-8", "replace").strip()
            return failed_sample(f"HTTP {resp.status_code}: {detail[:200]}")
        async for line in sse_lines(resp.aiter_bytes()):
            if not line.startswith("data:"):
                continue  # blank separators, SSE comments
            now = clock()
            payload = line[5:].strip()
            if payload == "[DONE]":
                done, end_t = True, now
                continue  # read to the end so the connection can be reused
            if not (payload.startswith("{") and payload.endswith("}")):  # O(1): the full parse is for the last chunk
                raise ValueError(f"a chunk that is not a JSON object: {payload[:80]!r}")
            if '"error"' in payload:  # rare: parse only then (text is JSON-escaped, so it cannot fake this key)
                err = json.loads(payload).get("error")
                if err is not None:
                    return failed_sample(f"server error: {err.get('message', err) if isinstance(err, dict) else err}")
            # SGLang's chunks carry the cumulative text and ids, so parsing each one costs O(tokens so far); only the
            # token count is needed per chunk, and the whole meta_info of the last chunk at the end.
            ct = _completion_tokens(payload)
            ct = last_ct + 1 if ct is None else ct  # no meta_info: count one token per chunk
            check_count("completion_tokens", ct, limit)  # it sizes the list of gaps below
            if virtual is not None:
                pairs = parse_times(payload)
                if pairs is None:
                    return failed_sample("the server declared a virtual clock but a stream chunk carries no sim_times")
                for _, pair_ct in pairs:
                    check_count("completion_tokens in sim_times", pair_ct, limit)
                virtual.feed(pairs)
            new = ct - last_ct
            if new > 0:
                if ttft is None:
                    ttft = now - t0
                else:
                    itl.extend([(now - last_t) * scale / new] * new)
                last_t, last_ct = now, ct
            end_t = now
            last_payload = payload
    meta: dict[str, Any] = (json.loads(last_payload).get("meta_info") or {}) if last_payload else {}
    finish = meta.get("finish_reason")
    if isinstance(finish, dict) and finish.get("type") == "abort":
        return failed_sample(f"aborted by the server: {finish.get('message', '')}")
    if not done and finish is None:
        return failed_sample(f"broken stream: ended before [DONE] after {last_ct} tokens")
    if ttft is None or end_t is None:
        return failed_sample("stream carried no tokens")
    itl_s = tuple(itl)
    ttft_s, e2e_s = ttft * scale, (end_t - t0) * scale
    if virtual is not None and slot is not None:
        if virtual.first is None or virtual.last is None:
            return failed_sample("the stream's chunks carried no virtual times")
        joined = meta.get(META_ARRIVAL)  # after a request the client abandoned, the engine's time, past the send time
        sent = (
            max(virtual.sent, joined)
            if isinstance(joined, (int, float)) and not isinstance(joined, bool)
            else virtual.sent
        )
        ttft_s, e2e_s, itl_s = virtual.first - sent, virtual.last - sent, tuple(virtual.itl)
        slot.t = virtual.last
    verify = meta.get("spec_verify_ct")
    accept = meta.get("spec_accept_length")
    for name, value in (
        ("prompt_tokens", meta.get("prompt_tokens")),
        ("spec_verify_ct", verify),
        ("spec_accept_length", accept),
    ):
        if value is not None:
            check_count(name, value)
    if verify == 0:
        accept = None  # no verify step (every token came from prefill): no accept length to report
    elif accept is None and verify:
        accept = last_ct / verify
    return RequestSample(
        ok=True,
        prompt_tokens=int(meta.get("prompt_tokens") or 0),
        output_tokens=last_ct,
        ttft_s=ttft_s,
        e2e_s=e2e_s,
        itl_s=itl_s,
        accept_length=float(accept) if accept else None,
        spec_verify_ct=int(verify) if verify else None,
    )


async def send_request(
    client: httpx.AsyncClient,
    body: bytes,
    scale: float,
    timeout_s: float,
    clock: Clock = time.perf_counter,
    slot: VirtualSlot | None = None,
) -> tuple[RequestSample, bool]:
    """One request as a sample, never an exception; the flag says the server refused the connection (gone)."""
    try:
        return await asyncio.wait_for(_stream_one(client, body, scale, clock, slot), timeout_s), False
    except httpx.ConnectError as exc:
        return failed_sample(f"connection refused: server is not running / crashed ({exc})"), True
    except (httpx.TimeoutException, asyncio.TimeoutError) as exc:
        return failed_sample(f"timeout after {timeout_s:g} s ({type(exc).__name__})"), False
    except httpx.HTTPError as exc:
        return failed_sample(f"broken stream: {type(exc).__name__}: {exc}"), False
    except ImplausibleCount as exc:  # a lying or broken server: never trusted to size anything
        return failed_sample(f"implausible count from the server: {exc}"), False
    except (ValueError, TypeError, AttributeError) as exc:  # a chunk that is not the JSON SGLang sends
        return failed_sample(f"malformed stream chunk: {type(exc).__name__}: {exc}"), False
