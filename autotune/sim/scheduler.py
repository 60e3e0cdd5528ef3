"""Continuous batching in simulated time, shaped like SGLang's scheduler. Synchronous and clock-free.

Each call to ``Scheduler.step()`` plans and accounts one iteration and returns its duration (from the performance
model) and the tokens it produced; the caller (``engine.Engine``, or a test with a virtual clock) lets the time pass.
Policy, as SGLang's default (no mixed chunk):
- a prefill batch runs whenever waiting requests can be admitted: up to ``max_running_requests`` running, the KV cache
  holding the prompt plus a reserve of ``new_token_ratio * max_new_tokens`` per request, at most
  ``min(max_prefill_tokens, chunked_prefill_size)`` new tokens per pass (a longer prompt is prefilled in chunks);
- otherwise the running batch decodes one step: each request gains one token, or with speculation the sampled
  accepted tokens; when the KV cache cannot hold the step, requests are retracted to the queue (re-prefilled later).
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

from autotune.sim.model import PerfModel
from autotune.sim.spec import SpecConfig


@dataclass(eq=False)
class SimRequest:
    rid: str
    prompt_tokens: int
    max_new_tokens: int
    arrival: float = 0.0
    prefilled: int = 0  # tokens of (prompt + retracted output) already in the KV cache
    output: int = 0
    verify_ct: int = 0
    accepted_drafts: int = 0
    retractions: int = 0
    first_token_at: float | None = None
    finished_at: float | None = None

    carried: int = 0  # output tokens re-prefilled after a retraction

    @property
    def target_prefill(self) -> int:
        """Tokens to prefill before decoding: the prompt, plus the output kept across a retraction."""
        return self.prompt_tokens + self.carried

    @property
    def kv_tokens(self) -> int:
        if self.prefilled < self.target_prefill:
            return self.prefilled
        return self.prefilled + self.output - self.carried

    @property
    def done(self) -> bool:
        return self.finished_at is not None or (self.output >= self.max_new_tokens and self.output > 0)


@dataclass(frozen=True)
class Iteration:
    kind: str  # "prefill" or "decode"
    duration: float  # simulated seconds, before noise
    batch_size: int
    new_tokens: int  # prefill: tokens prefilled; decode: tokens generated
    produced: tuple[tuple[SimRequest, int], ...]  # (request, tokens it gained this iteration)
    finished: tuple[SimRequest, ...]
    first_tokens: tuple[SimRequest, ...] = ()
    graph: bool = True
    retracted: int = 0


@dataclass
class Scheduler:
    model: PerfModel
    kv_capacity: int
    max_running: int
    chunk_size: int  # <= 0: no chunking
    max_prefill_tokens: int
    new_token_ratio: float
    spec: SpecConfig | None
    seed: int = 0
    waiting: deque[SimRequest] = field(default_factory=deque)
    running: list[SimRequest] = field(default_factory=list)
    chunked: SimRequest | None = None
    total_verify: int = 0
    total_accepted_tokens: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    # ---- queue -------------------------------------------------------------------------------------------------
    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    def abort(self, req: SimRequest) -> None:
        """Drop a request (client went away); its KV cache is freed."""
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
        if self.chunked is req:
            self.chunked = None

    @staticmethod
    def stamp(it: Iteration, end: float) -> None:
        """Record when the iteration's first tokens and finished requests happened (its simulated end)."""
        for r in it.first_tokens:
            r.first_token_at = end
        for r in it.finished:
            r.finished_at = end

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.chunked)

    @property
    def kv_used(self) -> int:
        used = sum(r.kv_tokens for r in self.running)
        return used + (self.chunked.prefilled if self.chunked else 0)

    def _reserved(self) -> float:
        return sum(max(r.max_new_tokens - r.output, 0) * self.new_token_ratio for r in self.running)

    # ---- one iteration -----------------------------------------------------------------------------------------
    def step(self, now: float) -> Iteration | None:
        """Plan and account one iteration starting at simulated time ``now``; None when idle."""
        it = self._prefill(now)
        if it is not None:
            return it
        if self.running:
            return self._decode(now)
        return None

    def _prefill(self, now: float) -> Iteration | None:
        budget = self.max_prefill_tokens
        if self.chunk_size > 0:
            budget = min(budget, self.chunk_size)
        batch: list[tuple[SimRequest, int]] = []
        free = self.kv_capacity - self.kv_used - self._reserved()
        n_running = len(self.running)
        if self.chunked is not None:
            r = self.chunked
            take = min(r.target_prefill - r.prefilled, budget)
            batch.append((r, take))
            budget -= take
            free -= take
        while self.waiting and budget > 0 and n_running + len(batch) < self.max_running:
            r = self.waiting[0]
            need = r.target_prefill - r.prefilled
            reserve = max(r.max_new_tokens - r.output, 0) * self.new_token_ratio
            if need + reserve > free and (self.running or batch):
                break  # queue until memory frees up (an idle server always admits the head request)
            if need + 1 > self.kv_capacity - self.kv_used:
                break
            take = need
            if need > budget:
                if self.chunk_size <= 0:
                    if batch:
                        break
                else:
                    if self.chunked is not None or any(t < r.target_prefill - r.prefilled for r, t in batch):
                        break
                    take = budget
            self.waiting.popleft()
            batch.append((r, take))
            budget -= take
            free -= take + reserve
        if not batch:
            return None
        n_tokens = sum(t for _, t in batch)
        ctx = sum(r.prefilled for r, _ in batch)
        duration = self.model.prefill(n_tokens, len(batch), ctx)
        firsts: list[SimRequest] = []
        produced: list[tuple[SimRequest, int]] = []
        finished: list[SimRequest] = []
        self.chunked = None
        for r, take in batch:
            r.prefilled += take
            if r.prefilled < r.target_prefill:
                self.chunked = r
                continue
            if r.output == 0:  # the prefill pass samples the first token
                r.output = 1
                firsts.append(r)
                produced.append((r, 1))
            if r.output >= r.max_new_tokens:
                finished.append(r)
            else:
                self.running.append(r)
        return Iteration(
            "prefill", duration, len(batch), n_tokens, tuple(produced), tuple(finished), tuple(firsts), graph=False
        )

    def _retract_if_needed(self) -> int:
        per_req = self.spec.num_draft_tokens if self.spec else 1
        retracted = 0
        while len(self.running) > 1 and self.kv_used + per_req * len(self.running) > self.kv_capacity:
            victim = min(self.running, key=lambda r: (r.output, -r.prompt_tokens))
            self.running.remove(victim)
            victim.carried = victim.output
            victim.prefilled = 0
            victim.retractions += 1
            self.waiting.appendleft(victim)
            retracted += 1
        return retracted

    def _decode(self, now: float) -> Iteration:
        retracted = self._retract_if_needed()
        batch = self.running
        ctx = sum(r.kv_tokens for r in batch)
        gains = [
            min(self.spec.sample_accepted(self._rng) if self.spec else 1, r.max_new_tokens - r.output) for r in batch
        ]
        cost = self.model.decode_step(len(batch), ctx, float(sum(gains) - len(gains)) if self.spec else None)
        produced: list[tuple[SimRequest, int]] = []
        keep: list[SimRequest] = []
        finished: list[SimRequest] = []
        generated = 0
        for r, n in zip(batch, gains, strict=True):
            r.output += n
            generated += n
            if self.spec:
                r.verify_ct += 1
                r.accepted_drafts += n - 1
                self.total_verify += 1
                self.total_accepted_tokens += n
            produced.append((r, n))
            if r.output >= r.max_new_tokens:
                finished.append(r)
            else:
                keep.append(r)
        self.running = keep
        return Iteration(
            "decode", cost.seconds, len(batch), generated, tuple(produced), tuple(finished), (), cost.graph, retracted
        )
