"""The replica's proxy: one shared client, the request's end-to-end headers and query reach the engine, hop-by-hop
ones do not, and the engine's answer (status, headers, streamed body) comes back as sent."""

from __future__ import annotations

import json

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.testclient import TestClient

from autotune.serve.proxy import EngineProxy, forwarded_headers

SEEN: list[httpx.Request] = []


def _reply(status: int, body: bytes, **headers: str) -> httpx.Response:
    """A response whose body is a stream, as a real engine's is (the proxy reads it raw)."""
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))


def _engine(request: httpx.Request) -> httpx.Response:
    SEEN.append(request)
    if request.url.path == "/v1/stream":
        return _reply(200, b"data: 1\n\ndata: [DONE]\n\n", **{"content-type": "text/event-stream", "x-engine": "1"})
    if request.headers.get("authorization") != "Bearer k":
        return _reply(401, b'{"error": "bad key"}', **{"content-type": "application/json"})
    body = {"path": request.url.path, "query": str(request.url.query, "ascii"), "echo": json.loads(request.content)}
    return _reply(
        200, json.dumps(body).encode(), **{"content-type": "application/json", "x-engine": "1", "connection": "close"}
    )


def _client(proxy: EngineProxy) -> TestClient:
    async def route(request: Request) -> Response:
        return await proxy.forward(request, "http://engine", request.url.path)

    app = Starlette(routes=[Route("/{path:path}", route, methods=["GET", "POST"])])
    return TestClient(app)


def test_headers_and_query_pass_through_with_one_shared_client() -> None:
    SEEN.clear()
    proxy = EngineProxy(transport=httpx.MockTransport(_engine))
    client = _client(proxy)
    for i in range(3):
        r = client.post(
            f"/v1/completions?x={i}",
            json={"prompt": "hi"},
            headers={"Authorization": "Bearer k", "X-Request-Id": f"r{i}", "Connection": "X-Hop", "X-Hop": "1"},
        )
        assert r.status_code == 200 and r.json() == {
            "path": "/v1/completions",
            "query": f"x={i}",
            "echo": {"prompt": "hi"},
        }
        assert r.headers["x-engine"] == "1"
    assert proxy.clients_opened == 1
    sent = SEEN[-1].headers
    assert sent["authorization"] == "Bearer k" and sent["x-request-id"] == "r2"
    assert sent["host"] == "engine"  # the engine's own host, not the client's
    assert "x-hop" not in sent  # named in the client's Connection header: meant for the proxy only
    unauthorized = client.post("/v1/completions", json={"prompt": "hi"})
    assert unauthorized.status_code == 401 and unauthorized.json() == {"error": "bad key"}


def test_a_stream_is_relayed_as_sent() -> None:
    proxy = EngineProxy(transport=httpx.MockTransport(_engine))
    r = _client(proxy).post("/v1/stream", json={"stream": True})
    assert r.status_code == 200 and r.text == "data: 1\n\ndata: [DONE]\n\n"
    assert r.headers["content-type"].startswith("text/event-stream")


def test_hop_by_hop_headers_are_dropped() -> None:
    kept = forwarded_headers(
        [
            ("Connection", "close, X-Private"),
            ("X-Private", "1"),
            ("Transfer-Encoding", "chunked"),
            ("Authorization", "Bearer k"),
            ("Host", "a"),
            ("Accept", "*/*"),
        ]
    )
    assert kept == [("Authorization", "Bearer k"), ("Accept", "*/*")]


def test_a_header_value_outside_ascii_reaches_the_engine_as_sent() -> None:
    SEEN.clear()
    proxy = EngineProxy(transport=httpx.MockTransport(_engine))
    title = "Café Überblick".encode()  # UTF-8 bytes, as a client sends them
    r = _client(proxy).post("/v1/stream", json={"stream": True}, headers={"X-Title": title})
    assert r.status_code == 200
    assert dict((k.lower(), v) for k, v in SEEN[-1].headers.raw)[b"x-title"] == title


def test_a_repeated_query_parameter_reaches_the_engine_whole() -> None:
    SEEN.clear()
    proxy = EngineProxy(transport=httpx.MockTransport(_engine))
    r = _client(proxy).post("/v1/completions?tag=a&tag=b&q=x%2By", json={}, headers={"Authorization": "Bearer k"})
    assert r.status_code == 200 and r.json()["query"] == "tag=a&tag=b&q=x%2By"
