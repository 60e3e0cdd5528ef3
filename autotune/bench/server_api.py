"""What the benchmark client asks the server itself, outside the measured requests: ``/server_info`` (older SGLang:
``/get_server_info``) for the time scale, the virtual clock and the average accept length, and ``/flush_cache``."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx

from autotune.core.errors import BenchError
from autotune.core.virtual_clock import CLOCK_KIND

_INFO_PATHS = ("/server_info", "/get_server_info")


@dataclass(frozen=True)
class ServerInfo:
    """What the client reads from ``/server_info``: the time scale and the server's average accept length."""

    time_scale: float = 1.0
    accept_length: float | None = None
    endpoint: str | None = None  # the path that answered; None when neither did
    virtual_clock: bool = False  # a simulated server that reports virtual times (autotune/core/virtual_clock.py)


def unreachable(base_url: str, exc: Exception) -> BenchError:
    return BenchError(f"cannot connect to {base_url}: server is not running / crashed ({type(exc).__name__}: {exc})")


async def fetch_server_info(client: httpx.AsyncClient, base_url: str) -> ServerInfo:
    """Read ``/server_info``, falling back to ``/get_server_info``; a server that answers neither gets the defaults."""
    for path in _INFO_PATHS:
        try:
            resp = await client.get(path)
        except httpx.TransportError as exc:
            raise unreachable(base_url, exc) from exc
        if resp.status_code != 200:
            continue
        try:
            data = resp.json()
        except ValueError:
            continue
        if isinstance(data, dict):
            return parse_server_info(data, path)
    return ServerInfo()


def parse_server_info(data: dict[str, Any], path: str) -> ServerInfo:
    scale: Any = 1.0
    virtual = False
    sim = data.get("sim")
    if isinstance(sim, dict):
        virtual = sim.get("clock") == CLOCK_KIND
    if isinstance(sim, dict) and sim.get("time_scale") is not None:
        scale = sim["time_scale"]
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale <= 0:
            raise BenchError(f"{path} declares sim.time_scale={scale!r}; it must be a positive number (fix the server)")
    accept = None
    states = data.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        value = states[0].get("avg_spec_accept_length")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            accept = float(value)
    return ServerInfo(time_scale=float(scale), accept_length=accept, endpoint=path, virtual_clock=virtual)


FLUSH_RETRY_S = 30.0


def set_internal_state_updated(body: object) -> bool:
    """Whether a ``/set_internal_state`` answer says every scheduler applied the update: SGLang 0.5.17 answers a list
    with one bool per scheduler (``[true]``, seen on the H200); ``{"updated": true}`` items are taken as well."""
    items = body if isinstance(body, list) else [body]
    return bool(items) and all(b is True or (isinstance(b, dict) and b.get("updated") is True) for b in items)


async def reset_accept_counters(client: httpx.AsyncClient) -> bool:
    """Zero the counters behind ``/server_info``'s ``avg_spec_accept_length``: SGLang (0.5.17,
    ``Scheduler.set_internal_state``) zeroes them whenever an update succeeds, and an empty update
    (``{"server_args": {}}``) succeeds. True when the server confirmed (``updated``), else False (an older release,
    or a server without the endpoint): the next reading then averages since launch."""
    try:
        resp = await client.post("/set_internal_state", json={"server_args": {}})
        body = resp.json() if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return False
    return set_internal_state_updated(body)


async def flush_cache(client: httpx.AsyncClient, base_url: str, timeout_s: float = FLUSH_RETRY_S) -> bool | None:
    """Flush the server's radix (prefix) cache: True when flushed, False when the server kept refusing (busy) for
    ``timeout_s``, None when it has no ``/flush_cache`` (404/405). SGLang refuses (HTTP 400) while requests run."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            resp = await client.post("/flush_cache")
        except httpx.TransportError as exc:
            raise unreachable(base_url, exc) from exc
        if resp.status_code == 200:
            return True
        if resp.status_code in (404, 405, 501):
            return None
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.2)
