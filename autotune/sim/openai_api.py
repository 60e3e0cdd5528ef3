"""OpenAI-style endpoints of the simulated server: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``."""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from autotune.sim.engine import EngineLoop
from autotune.sim.handle import Handle
from autotune.sim.request_parse import json_body, kv_error, parse_openai
from autotune.sim.streaming import output_text


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": "BadRequestError", "code": status}, status=status
    )


class _Delta:
    """Builds OpenAI chunks carrying only the text added since the previous chunk."""

    def __init__(self, model: str, chat: bool, include_usage: bool) -> None:
        self.model, self.chat, self.include_usage = model, chat, include_usage
        self.sent = 0
        self.created = int(time.time())

    def __call__(self, engine: EngineLoop, h: Handle, final: bool, vocab: int) -> dict[str, Any]:
        full = output_text(h.output, vocab)
        piece, self.sent = full[self.sent :], len(full)
        finish = "length" if final else None
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "finish_reason": finish}
            obj = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": piece, "logprobs": None, "finish_reason": finish, "matched_stop": None}
            obj = "text_completion"
        out: dict[str, Any] = {
            "id": h.req.rid,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }
        if final and self.include_usage:
            out["usage"] = _usage(h)
        return out


def _usage(h: Handle) -> dict[str, int]:
    return {
        "prompt_tokens": h.req.prompt_tokens,
        "completion_tokens": h.output,
        "total_tokens": h.req.prompt_tokens + h.output,
    }


async def _openai(request: web.Request, st: Any, run_request: Any, chat: bool) -> web.StreamResponse:
    body = await json_body(request, st, _error)
    if isinstance(body, web.Response):
        return body
    gen = parse_openai(body, chat=chat, context_len=st.cfg.context_len)
    if isinstance(gen, str):
        return _error(400, gen)
    too_big = kv_error(gen.prompt_tokens, st.cfg.kv_tokens)
    if too_big:
        return _error(400, too_big)
    opts = body.get("stream_options") or {}
    model = body.get("model") or st.model_name()
    if gen.stream:
        builder = _Delta(model, chat, bool(opts.get("include_usage")))
        return await run_request(request, st, gen, builder)

    def whole(engine: EngineLoop, h: Handle, final: bool, vocab: int) -> dict[str, Any]:
        text = output_text(h.output, vocab)
        if chat:
            choice: dict[str, Any] = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "length",
            }
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length", "matched_stop": None}
        return {
            "id": h.req.rid,
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [choice],
            "usage": _usage(h),
        }

    return await run_request(request, st, gen, whole)


async def completions(request: web.Request, st: Any, run_request: Any) -> web.StreamResponse:
    return await _openai(request, st, run_request, chat=False)


async def chat_completions(request: web.Request, st: Any, run_request: Any) -> web.StreamResponse:
    return await _openai(request, st, run_request, chat=True)


async def list_models(request: web.Request, st: Any) -> web.Response:
    return web.json_response(
        {"object": "list", "data": [{"id": st.model_name(), "object": "model", "created": 0, "owned_by": "sglang"}]}
    )
