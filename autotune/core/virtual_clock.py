"""The virtual-clock protocol between the simulated SGLang server (``autotune/sim``) and the benchmark client.

The simulated engine is a discrete-event simulation: its figures come from its own (virtual) clock, never from the wall
clock of the host. A closed-loop client keeps that clock honest by telling the server when, in virtual time, each
request is sent, and when it will send no more:

- ``GET /server_info`` declares ``sim.clock == "virtual"`` (:data:`CLOCK_KIND`) when the server speaks this protocol.
- ``POST /sim/hold`` with ``{"requests": n}``: "I am about to send ``n`` requests". The engine does not advance its clock
  until they have arrived. Answers ``{"now": t, "expected": k}``: ``t`` is the engine's current virtual time, the send
  time of those requests. With ``"at": s`` the requests are sent at virtual time ``s``: the clock runs up to ``s``, not
  past it, until they arrived (a request sent at ``s`` fills that announcement). With ``"in_flight_at": u`` the answer
  waits until the engine has done everything before ``u`` and adds ``"in_flight"``: the requests that joined by ``u``
  and had not finished (an open-loop client's count of requests in flight at its send time ``u``).
- A request with the header ``X-Sim-Send-Time: t`` (virtual seconds) joins the timeline at ``t`` (not before the
  engine's current time) and fills one expected slot. When it finishes, the engine again expects one request at that
  moment: the client's next request (sent with the finish time as its send time) or a release. A request the client
  abandons (a wall-clock timeout) expects nothing: the engine does not stall on a client that has lost track, and
  that worker's next request joins at the engine's current time.
- A request with the header ``X-Sim-Successor: 0`` expects nothing when it finishes: an open-loop client sends its
  requests at scheduled times, not when earlier ones end (it announces each next arrival with ``/sim/hold`` and
  ``at`` instead).
- ``POST /sim/release`` with ``{"requests": n}``: "I will send ``n`` fewer requests" (a worker that stops).
- Each streamed ``/generate`` chunk carries, last in its ``meta_info``, ``sim_arrival`` (the virtual time the request
  joined) and ``sim_times``: ``[[t, completion_tokens], ...]``, one pair per engine iteration that gave the request
  tokens since the previous chunk (``t`` the iteration's virtual end). TTFT, inter-token gaps and end-to-end latency
  follow from these, whatever the host load and however the chunks were coalesced.

Requests without the header are placed at the engine's current virtual time, interpolated from the wall clock with the
time scale, as SGLang's own clients would see it; their figures then carry host timing, which is why autotune's client
uses the protocol. If an expected request does not come within the server's hold timeout (wall seconds), the engine
stops waiting for it and says so in its log.
"""

from __future__ import annotations

import json

CLOCK_KIND = "virtual"
SEND_TIME_HEADER = "X-Sim-Send-Time"
SUCCESSOR_HEADER = "X-Sim-Successor"
HOLD_PATH = "/sim/hold"
RELEASE_PATH = "/sim/release"
META_ARRIVAL = "sim_arrival"
META_TIMES = "sim_times"

_TIMES_KEY = f'"{META_TIMES}":'


def format_time(t: float) -> str:
    """A virtual time as sent in headers and JSON: full float precision (``repr``), so both sides agree exactly."""
    return repr(float(t))


def parse_times(payload: str) -> list[tuple[float, int]] | None:
    """``meta_info.sim_times`` of one SSE chunk's JSON text, or ``None`` when the chunk has none.

    Reads only that list (the server writes it last in ``meta_info``), not the chunk's cumulative text.
    """
    i = payload.rfind(_TIMES_KEY)
    if i < 0:
        return None
    start = i + len(_TIMES_KEY)
    if payload.startswith("[]", start):
        return []
    end = payload.find("]]", start)  # pairs hold only numbers, so the first "]]" closes the list
    if end < 0:
        raise ValueError(f"unterminated {META_TIMES} list in a stream chunk")
    return [(float(t), int(ct)) for t, ct in json.loads(payload[start : end + 2])]
