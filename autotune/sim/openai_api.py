"""OpenAI-style endpoints of the simulated server: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from autotune.sim.engine import EngineLoop, Handle
from autotune.sim.streaming import output_text, prompt_tokens_of


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": "BadRequestError", "code": status}, status=status
    )


def _prompt_tokens(prompt: Any) -> int | None:
    if isinstance(prompt, str):
        return prompt_tokens_of(prompt)
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return len(prompt)
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        return prompt_tokens_of(prompt[0])
    return None


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
    if not st.ready or st.engine is None:
        return _error(503, "The server is not ready yet.")
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return _error(400, "request body is not valid JSON")
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return _error(400, "messages must be a non-empty list")
        n_prompt = sum(prompt_tokens_of(str(m.get("content", ""))) + 4 for m in msgs if isinstance(m, dict))
        max_new = body.get("max_completion_tokens") or body.get("max_tokens") or 128
    else:
        n = _prompt_tokens(body.get("prompt"))
        if n is None:
            return _error(400, "prompt must be a string or a list of token ids (one prompt per request)")
        n_prompt, max_new = n, body.get("max_tokens") or 16
    if not isinstance(max_new, int) or max_new < 1:
        return _error(400, f"max_tokens must be a positive integer, got {max_new!r}")
    if n_prompt + max_new > st.cfg.context_len:
        return _error(400, f"This model's maximum context length is {st.cfg.context_len} tokens.")
    stream = bool(body.get("stream", False))
    opts = body.get("stream_options") or {}
    model = body.get("model") or st.model_name()
    if stream:
        builder = _Delta(model, chat, bool(opts.get("include_usage")))
        return await run_request(request, st, n_prompt, max_new, True, builder)

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

    return await run_request(request, st, n_prompt, max_new, False, whole)


async def completions(request: web.Request, st: Any, run_request: Any) -> web.StreamResponse:
    return await _openai(request, st, run_request, chat=False)


async def chat_completions(request: web.Request, st: Any, run_request: Any) -> web.StreamResponse:
    return await _openai(request, st, run_request, chat=True)


async def list_models(request: web.Request, st: Any) -> web.Response:
    return web.json_response(
        {"object": "list", "data": [{"id": st.model_name(), "object": "model", "created": 0, "owned_by": "sglang"}]}
    )
