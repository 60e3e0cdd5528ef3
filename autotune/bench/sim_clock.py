"""The client's side of the simulated server's virtual-clock protocol (``autotune/core/virtual_clock.py``).

A closed-loop worker holds a :class:`VirtualSlot`: the virtual time at which it sends its next request (the level's
start, then the virtual finish time of its previous request). :class:`VirtualTiming` turns the ``sim_times`` pairs of a
stream's chunks into TTFT, per-token gaps and end-to-end latency, so a simulated figure never contains host time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from autotune.core.errors import BenchError
from autotune.core.virtual_clock import HOLD_PATH, RELEASE_PATH, SEND_TIME_HEADER, SUCCESSOR_HEADER, format_time


@dataclass
class VirtualSlot:
    """One worker's position on the server's virtual clock (seconds). ``successor``: the worker sends another request
    when this one ends (closed loop, or a conversation's next turn); False for an open-loop send."""

    t: float
    successor: bool = True

    def headers(self) -> dict[str, str]:
        if self.successor:
            return {SEND_TIME_HEADER: format_time(self.t)}
        return {SEND_TIME_HEADER: format_time(self.t), SUCCESSOR_HEADER: "0"}


@dataclass
class VirtualTiming:
    """Virtual times of one request, fed chunk by chunk; ``sent`` is the worker's send time."""

    sent: float
    first: float | None = None
    last: float | None = None
    tokens: int = 0
    itl: list[float] = field(default_factory=list)

    def feed(self, pairs: list[tuple[float, int]]) -> None:
        """Add one chunk's (iteration end, completion tokens) pairs; a gap is spread over the tokens it brought."""
        for t, ct in pairs:
            new = ct - self.tokens
            if new <= 0:
                continue
            if self.first is None:
                self.first = t
            elif self.last is not None:
                self.itl.extend([(t - self.last) / new] * new)
            self.last, self.tokens = t, ct


async def _clock_call(client: httpx.AsyncClient, path: str, body: dict[str, float], key: str = "now") -> float:
    try:
        resp = await client.post(path, json=body)
    except httpx.TransportError as exc:
        raise BenchError(f"the simulated server's clock did not answer {path}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise BenchError(f"{path} answered HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        return float(resp.json()[key])
    except (ValueError, KeyError, TypeError) as exc:
        raise BenchError(f"{path} answered without {key!r}: {resp.text[:200]}") from exc


async def hold(client: httpx.AsyncClient, n: int) -> float:
    """Announce ``n`` requests; returns the server's virtual time, the send time of those requests."""
    return await _clock_call(client, HOLD_PATH, {"requests": n})


async def hold_at(client: httpx.AsyncClient, n: int, at: float | None, in_flight_at: float) -> int:
    """Announce ``n`` requests sent at virtual time ``at`` (the engine may run up to it); returns, once the engine has
    done everything before ``in_flight_at``, how many requests were in flight at that virtual time."""
    body = {"requests": n, "in_flight_at": in_flight_at}
    if at is not None:
        body["at"] = at
    return int(await _clock_call(client, HOLD_PATH, body, "in_flight"))


async def release(client: httpx.AsyncClient, n: int = 1) -> None:
    """Withdraw ``n`` announced requests (a worker that stops)."""
    await _clock_call(client, RELEASE_PATH, {"requests": n})
