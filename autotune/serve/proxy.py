"""HTTP proxy from a Serve replica to its engine on loopback: one shared client, the request's headers passed through.

``Authorization`` (SGLang's ``--api-key``), ``Accept``, custom headers and the query string reach the engine; the
hop-by-hop headers of the client's connection (RFC 9110 7.6.1) and ``Host`` do not. The response comes back as the
engine sent it (status, content type, content encoding), streamed chunk by chunk.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable

import httpx
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",  # recomputed for the body actually sent
    }
)


def forwarded_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The end-to-end headers of a request or response (hop-by-hop ones and those named in Connection dropped)."""
    pairs = list(headers)
    named = {
        token.strip().lower()
        for name, value in pairs
        if name.lower() == "connection"
        for token in value.split(",")
        if token.strip()
    }
    return [(k, v) for k, v in pairs if k.lower() not in HOP_BY_HOP and k.lower() not in named]


class EngineProxy:
    """Forwards requests to ``base_url``; one ``httpx.AsyncClient`` (connection pool) for the replica's lifetime."""

    def __init__(self, max_connections: int = 4096, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
        self._transport = transport  # a seam for tests
        self._client: httpx.AsyncClient | None = None
        self.clients_opened = 0

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            self._client = httpx.AsyncClient(
                timeout=None, trust_env=False, limits=self._limits, transport=self._transport
            )
            self.clients_opened += 1
        return self._client

    async def forward(self, request: Request, base_url: str, path: str) -> Response:
        body = await request.body()
        query = request.url.query  # as sent: a repeated key keeps every value
        upstream = self.client.build_request(
            request.method,
            base_url + path + (f"?{query}" if query else ""),
            content=body,
            # the bytes as received (Starlette reads them as latin-1; httpx would encode a str as ASCII and fail)
            headers=[(k.encode("latin-1"), v.encode("latin-1")) for k, v in forwarded_headers(request.headers.items())],
        )
        resp = await self.client.send(upstream, stream=True)
        headers = dict(forwarded_headers(resp.headers.items()))
        media_type = resp.headers.get("content-type")
        if "text/event-stream" in (media_type or "") or _wants_stream(body):

            async def relay() -> AsyncIterator[bytes]:
                try:
                    async for chunk in resp.aiter_raw():
                        yield chunk
                finally:
                    await resp.aclose()

            return StreamingResponse(relay(), status_code=resp.status_code, headers=headers, media_type=media_type)
        try:
            data = b"".join([chunk async for chunk in resp.aiter_raw()])
        finally:
            await resp.aclose()
        return Response(data, status_code=resp.status_code, headers=headers, media_type=media_type)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _wants_stream(body: bytes) -> bool:
    try:
        return bool(json.loads(body or b"{}").get("stream"))
    except (ValueError, AttributeError):
        return False
