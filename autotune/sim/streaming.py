"""Turning a running request into SGLang's responses: token text, ``meta_info``, and coalesced SSE streaming.

Streaming sends at most one chunk per request per ``--sim-stream-interval-ms`` of wall time (and per
``--stream-interval`` tokens), so 128+ streams stay cheap on a small host. Each chunk carries the virtual times of the
iterations it covers (``meta_info.sim_times``), so how chunks were coalesced never changes a figure. The first token and
the final chunk are sent at once.

Fault mode: with ``AUTOTUNE_SIM_FAULT=spec-corrupt-output`` in the server's environment, a server running speculative
decoding emits wrong tokens (every fifth output id is shifted by one), as a speculative setting that changes the
model's output would; without speculation the output is untouched. Tests use it to check the output-equality gate.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from autotune.core.virtual_clock import META_ARRIVAL, META_TIMES
from autotune.sim.engine import EngineLoop
from autotune.sim.handle import Handle

VOCAB_TEXT_BASE = 1000
FAULT_ENV = "AUTOTUNE_SIM_FAULT"
SPEC_CORRUPT_OUTPUT = "spec-corrupt-output"


def corrupts_outputs(speculative: bool) -> bool:
    """Whether this server's outputs are corrupted: the fault mode is on and the server speculates."""
    return speculative and os.environ.get(FAULT_ENV, "").strip() == SPEC_CORRUPT_OUTPUT


def corrupted_ids_json(n: int, vocab: int) -> str:
    """The first n output ids with every fifth one shifted by one (the fault mode's wrong tokens)."""
    ids = [token_id(i, vocab) + (1 if i % 5 == 4 else 0) for i in range(n)]
    return "[" + ",".join(map(str, ids)) + "]"


def token_id(index: int, vocab: int) -> int:
    """Deterministic output token ids (the dummy model's periodic pattern): the same for every request."""
    return VOCAB_TEXT_BASE + (index * 7919) % max(vocab - VOCAB_TEXT_BASE, 1)


class TokenText:
    """Cumulative text and id list of the first n output tokens, as slices of precomputed strings (cheap per chunk)."""

    def __init__(self, vocab: int, size: int = 4096) -> None:
        self.vocab = vocab
        self._text = ""
        self._ids = ""
        self._text_end: list[int] = [0]
        self._ids_end: list[int] = [0]
        self._grow(size)

    def _grow(self, n: int) -> None:
        texts, ids = [self._text], [self._ids]
        t_len, i_len = len(self._text), len(self._ids)
        for k in range(len(self._text_end) - 1, n):
            tid = token_id(k, self.vocab)
            piece, id_piece = f" t{tid}", (f",{tid}" if k else str(tid))
            texts.append(piece)
            ids.append(id_piece)
            t_len += len(piece)
            i_len += len(id_piece)
            self._text_end.append(t_len)
            self._ids_end.append(i_len)
        self._text, self._ids = "".join(texts), "".join(ids)

    def text(self, n: int) -> str:
        if n >= len(self._text_end):
            self._grow(max(n, 2 * len(self._text_end)))
        return self._text[: self._text_end[n]]

    def ids_json(self, n: int) -> str:
        if n >= len(self._ids_end):
            self._grow(max(n, 2 * len(self._ids_end)))
        return "[" + self._ids[: self._ids_end[n]] + "]"


_TEXTS: dict[int, TokenText] = {}


def token_text(vocab: int) -> TokenText:
    if vocab not in _TEXTS:
        _TEXTS[vocab] = TokenText(vocab)
    return _TEXTS[vocab]


def output_ids(n: int, vocab: int) -> list[int]:
    return [token_id(i, vocab) for i in range(n)]


def output_text(n: int, vocab: int) -> str:
    return token_text(vocab).text(n)


def prompt_tokens_of(text: str) -> int:
    """Prompt length for ``text`` without a tokenizer: about four characters per token, at least one."""
    return max(1, (len(text) + 3) // 4)


def meta_info(engine: EngineLoop, h: Handle, *, final: bool) -> dict[str, Any]:
    """SGLang's ``meta_info`` from what the engine has published, then the virtual-clock fields (last, see
    ``autotune/core/virtual_clock.py``): the request's arrival and the (time, tokens) pairs since the previous chunk."""
    r = h.req
    end = h.finished_at if final and h.finished_at is not None else (h.events[-1][0] if h.events else h.arrival)
    meta: dict[str, Any] = {
        "id": r.rid,
        "finish_reason": {"type": "length", "length": h.output} if final else None,
        "prompt_tokens": r.prompt_tokens,
        "completion_tokens": h.output,
        "cached_tokens": 0,
        "e2e_latency": round(end - h.arrival, 6),
    }
    spec = engine.cfg.spec
    if spec is not None:
        verify = max(h.verify_ct, 1)
        accept = h.output / verify
        meta["spec_verify_ct"] = h.verify_ct
        meta["spec_accept_length"] = round(accept, 4)
        # accept rate as the user's SGLang reported it: accept length / draft tokens (1.00 -> 0.25 at 4 tokens)
        meta["spec_accept_rate"] = round(accept / spec.num_draft_tokens, 4)
        meta["spec_num_correct_drafts"] = h.accepted_drafts
    meta[META_ARRIVAL] = h.arrival
    meta[META_TIMES] = h.take_events()
    return meta


async def token_updates(h: Handle, interval_s: float, every: int) -> AsyncIterator[bool]:
    """Yield ``final`` each time a chunk should be sent: at most one per ``interval_s`` wall seconds, the last at once.

    The engine only wakes the handler after ``h.notify_after`` (or when the request finishes), so a stream costs one
    wake-up per chunk, not one per token.
    """
    sent = 0
    while True:
        await h.event.wait()
        h.event.clear()
        if h.finished:
            yield True
            return
        if h.output - sent < every:
            continue
        sent = h.output
        h.notify_after = time.monotonic() + interval_s
        yield False


def sse(payload: dict[str, Any] | str) -> bytes:
    body = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {body}\n\n".encode()


class Raw(str):
    """A pre-serialized JSON body (``sse`` and the server send it as is)."""


def generate_chunk(engine: EngineLoop, h: Handle, final: bool, vocab: int) -> Raw:
    """``{"text", "output_ids", "meta_info"}`` serialized by slicing precomputed strings (text needs no escaping)."""
    n = h.output
    tt = token_text(vocab)
    meta = json.dumps(meta_info(engine, h, final=final), separators=(",", ":"))
    ids = corrupted_ids_json(n, vocab) if corrupts_outputs(engine.cfg.spec is not None) else tt.ids_json(n)
    return Raw(f'{{"text":"{tt.text(n)}","output_ids":{ids},"meta_info":{meta}}}')


ChunkBuilder = Callable[[EngineLoop, Handle, bool, int], dict[str, Any]]
