"""What the simulated server reads from a request, in one place for ``/generate``, the OpenAI endpoints and the clock
protocol: the JSON body (503 until the engine is ready), the prompt length, the token budget and the context check.

Each endpoint answers errors in its own shape (SGLang's native ``{"error": ...}`` or OpenAI's ``{"object": "error"}``),
so the functions here take the endpoint's error builder, or return the message for the caller to wrap.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from autotune.sim.streaming import prompt_tokens_of

ErrorResponse = Callable[[int, str], web.Response]


class ServerState(Protocol):
    """What the parsing needs of the server's state (``autotune.sim.server.State``)."""

    @property
    def ready(self) -> bool: ...

    @property
    def engine(self) -> object | None: ...  # read-only here, so a State whose engine is an EngineLoop fits


@dataclass(frozen=True)
class Generation:
    """One request to generate: its prompt length, how many tokens to generate, whether to stream them."""

    prompt_tokens: int
    max_new_tokens: int
    stream: bool


async def json_body(request: web.Request, st: ServerState, error: ErrorResponse) -> dict[str, Any] | web.Response:
    """The request's JSON object, or ``error``'s answer: 503 while the engine is not ready, 400 for a body that is not
    JSON or not an object."""
    if not st.ready or st.engine is None:
        return error(503, "The server is not ready yet.")
    try:
        body = await request.json()
    except json.JSONDecodeError:
        return error(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return error(400, f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def token_ids_length(ids: object) -> int | None:
    """The length of one prompt given as token ids (a flat list of integers); None for anything else (a batch)."""
    if isinstance(ids, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
        return len(ids)
    return None


def context_error(prompt_tokens: int, max_new_tokens: int, context_len: int) -> str | None:
    """SGLang's message for a request that does not fit the model's context; None when it fits."""
    if prompt_tokens + max_new_tokens <= context_len:
        return None
    return (
        f"Requested token count exceeds the model's maximum context length of {context_len} tokens. You requested "
        f"a total of {prompt_tokens + max_new_tokens} tokens: {prompt_tokens} tokens from the input messages and "
        f"{max_new_tokens} tokens for the completion. Please reduce the number of tokens in the input messages or the "
        f"completion to fit within the limit."
    )


def kv_error(prompt_tokens: int, kv_tokens: int) -> str | None:
    """The refusal of a prompt the KV cache cannot hold (it would never be admitted and would block the queue behind
    it); None when it fits. Every generating endpoint checks it."""
    if prompt_tokens < kv_tokens:
        return None
    return f"The input ({prompt_tokens} tokens) is longer than the KV cache ({kv_tokens} tokens)."


def max_new_within_kv(prompt_tokens: int, max_new_tokens: int, kv_tokens: int) -> int:
    """SGLang's clip of a request's token budget to what one request may hold in the KV cache (``max_req_len -
    prompt - 1``, ``max_req_len = max_total_num_tokens - 1``), so a lone request never runs past the cache; at least 1."""
    return max(1, min(max_new_tokens, kv_tokens - prompt_tokens - 2))


def parse_generate(body: dict[str, Any], context_len: int) -> Generation | str:
    """A native ``/generate`` body (``text`` or ``input_ids``, ``sampling_params.max_new_tokens``, ``stream``), or the
    error message."""
    if body.get("input_ids") is not None:
        n = token_ids_length(body["input_ids"])
        if n is None:
            return "input_ids must be one list of token ids (batched requests are not supported by the simulator)"
        n_prompt = max(1, n)
    elif isinstance(body.get("text"), str):
        n_prompt = prompt_tokens_of(body["text"])
    else:
        return "Either text or input_ids should be provided (one prompt per request)."
    sp = body.get("sampling_params") or {}
    max_new = sp.get("max_new_tokens", 128)
    if not isinstance(max_new, int) or max_new < 0:
        return f"max_new_tokens must be a non-negative integer, got {max_new!r}"
    too_long = context_error(n_prompt, max_new, context_len)
    if too_long:
        return too_long
    return Generation(n_prompt, max(max_new, 1), bool(body.get("stream", False)))


def message_text(content: object) -> str:
    """A chat message's text: the string, or the ``text`` of its content parts (``[{"type": "text", "text": ...}]``)
    joined; anything else (None, an image part) adds no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _first_given(*values: object) -> object:
    """The first value that is not None (an explicit 0 is a value, not a default)."""
    return next(v for v in values if v is not None)


def parse_openai(body: dict[str, Any], *, chat: bool, context_len: int) -> Generation | str:
    """A ``/v1/chat/completions`` (``messages``) or ``/v1/completions`` (``prompt``) body, or the error message."""
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            return "messages must be a non-empty list"
        n_prompt = sum(prompt_tokens_of(message_text(m.get("content"))) + 4 for m in msgs if isinstance(m, dict))
        max_new = _first_given(body.get("max_completion_tokens"), body.get("max_tokens"), 128)
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        n = prompt_tokens_of(prompt) if isinstance(prompt, str) else token_ids_length(prompt)
        if not n:
            return "prompt must be a string or a list of token ids (one prompt per request)"
        n_prompt, max_new = n, _first_given(body.get("max_tokens"), 16)
    if not isinstance(max_new, int) or max_new < 1:
        return f"max_tokens must be a positive integer, got {max_new!r}"
    if n_prompt + max_new > context_len:
        return f"This model's maximum context length is {context_len} tokens."
    choices = body.get("n")
    if choices is not None and (isinstance(choices, bool) or choices != 1):
        return f"n={choices!r}: the simulated engine answers one choice per request (n=1); send {choices!r} requests instead"
    return Generation(n_prompt, max_new, bool(body.get("stream", False)))
