"""Speculative decoding as SGLang resolves it (steps / topk / draft-token rules) and the acceptance model. Pure.

Rules (SGLang ``srt/arg_groups/speculative_hook.py``; the facts shared with the pre-launch rules are in
``autotune.engines.sglang_facts``):
- NEXTN becomes EAGLE; any algorithm caps ``--max-running-requests`` at 48 when unset (applied in ``model.resolve``).
- steps / topk / draft tokens: all unset -> the model family's defaults; otherwise set together (steps without topk fails).
- topk 1 forces draft tokens = steps + 1 (with a warning).
- topk > 1 with page size > 1 needs attention backend flashinfer, fa3 or triton.
- topk > 1 needs draft_tokens - 1 <= topk + (steps - 1) * topk^2, else "selected index k out of range" at capture.
- NGRAM: topk = its max BFS breadth (10), draft tokens 12 by default, steps = draft tokens // topk.
- ``SGLANG_SIMULATE_ACC_LEN=x`` makes EAGLE-family verification accept x tokens per step on average.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from autotune.engines.sglang_facts import (
    NGRAM_DEFAULT_DRAFT_TOKENS,
    PAGED_TREE_BACKENDS,
    SIMULATE_ACC_LEN,
    canonical_algorithm,
    max_draft_tokens,
    simulated_accept_length,
)
from autotune.sim.args import ServerArgs
from autotune.sim.profile import Drafter, Profile

NGRAM_FULL_STORE_NODES = 4096  # the simulator's model: an n-gram store of this many nodes or more matches fully


class SpecError(Exception):
    """A speculative configuration SGLang refuses at start. ``str()`` is the error line to print."""


@dataclass(frozen=True)
class SpecConfig:
    algorithm: str  # EAGLE, EAGLE3, STANDALONE or NGRAM
    num_steps: int
    topk: int
    num_draft_tokens: int
    drafter: Drafter | None  # None for NGRAM
    accept_probs: tuple[float, ...]  # conditional acceptance per depth, after tree widening
    fixed_accept_length: float | None = None  # SGLANG_SIMULATE_ACC_LEN
    warnings: tuple[str, ...] = ()

    @property
    def accept_cap(self) -> int:
        """Most tokens one verify step can yield: the tree's depth + 1."""
        return min(self.num_draft_tokens, self.num_steps + 1) if self.algorithm != "NGRAM" else self.num_draft_tokens

    @property
    def expected_accept_length(self) -> float:
        if self.fixed_accept_length is not None:
            return min(max(1.0, self.fixed_accept_length), float(self.accept_cap))
        total, run = 1.0, 1.0
        for p in self.accept_probs:
            run *= p
            total += run
        return total

    def sample_accepted(self, rng: random.Random) -> int:
        """Tokens one sequence gains in one verify step (1 = only the target's own token)."""
        if self.fixed_accept_length is not None:
            x = min(max(1.0, self.fixed_accept_length), float(self.accept_cap))
            base = math.floor(x)
            return base + (1 if rng.random() < x - base else 0)
        n = 1
        for p in self.accept_probs:
            if rng.random() >= p:
                break
            n += 1
        return n


def chain_probs(first: tuple[float, ...], decay: float, depth: int) -> list[float]:
    """Per-position acceptance of a chain drafter: listed values, then geometric decay of the last one."""
    out: list[float] = []
    last = first[-1] if first else 0.0
    for i in range(depth):
        if i < len(first):
            out.append(first[i])
        else:
            last *= decay
            out.append(last)
    return [min(max(p, 0.0), 1.0) for p in out]


def widen(chain: list[float], topk: int, budget: int, miss_ratio: float) -> tuple[float, ...]:
    """Acceptance per depth of a draft tree of ``budget`` nodes (draft tokens - 1), at most ``topk`` wide per depth.

    SGLang keeps the ``budget`` highest-scoring nodes; we approximate that by adding nodes one at a time where they
    raise the expected accept length most. A depth with w candidates misses with probability (1-p) * miss_ratio^(w-1).
    """
    depth = len(chain)
    widths = [0] * depth

    def eff(i: int, w: int) -> float:
        return 0.0 if w == 0 else 1.0 - (1.0 - chain[i]) * miss_ratio ** (w - 1)

    def expected(ws: list[int]) -> float:
        total, run = 1.0, 1.0
        for i, w in enumerate(ws):
            run *= eff(i, w)
            total += run
        return total

    for _ in range(max(0, budget)):
        best_i, best_gain = -1, -1.0
        base = expected(widths)
        for i in range(depth):
            if widths[i] >= topk or (i > 0 and widths[i - 1] == 0):
                continue
            widths[i] += 1
            gain = expected(widths) - base
            widths[i] -= 1
            if gain > best_gain + 1e-12:
                best_i, best_gain = i, gain
        if best_i < 0:
            break
        widths[best_i] += 1
    return tuple(eff(i, w) for i, w in enumerate(widths) if w > 0)


def resolve_spec(args: ServerArgs, profile: Profile, env: Mapping[str, str]) -> SpecConfig | None:
    """Apply SGLang's rules to the speculative flags. Raises SpecError with SGLang's message where it fails."""
    algo = args.speculative_algorithm
    if algo is None:
        return None
    algo = canonical_algorithm(algo)
    warnings: list[str] = []
    steps, topk, draft = args.speculative_num_steps, args.speculative_eagle_topk, args.speculative_num_draft_tokens
    if algo == "NGRAM":
        topk = args.speculative_ngram_max_bfs_breadth
        draft = draft if draft is not None else NGRAM_DEFAULT_DRAFT_TOKENS
        steps = draft // topk
        backend = args.attention_backend or profile.defaults.attention_backend
        if topk > 1 and args.page_size > 1 and backend != "flashinfer":
            raise SpecError(
                f"ValueError: NGRAM speculative decoding with page_size > 1 (tree breadth {topk}) is only supported "
                f"by the flashinfer attention backend (got {backend})"
            )
        ng = profile.ngram
        # a store of few nodes keeps few n-grams and matches rarely: acceptance scales with its share of a full store
        fill = min(1.0, args.speculative_ngram_capacity / NGRAM_FULL_STORE_NODES)
        probs = tuple(p * fill for p in chain_probs(ng.accept_probs, ng.accept_decay, max(0, draft - 1)))
        return SpecConfig("NGRAM", steps, topk, draft, None, probs, None, ())
    if args.speculative_draft_model_path is None:
        raise SpecError(f"ValueError: --speculative-draft-model-path is required for --speculative-algorithm {algo}")
    drafter = profile.drafter_for(args.speculative_draft_model_path)
    if drafter is None:
        known = ", ".join(d.name for d in profile.drafters) or "none"
        raise SpecError(
            f"OSError: Incorrect path_or_model_id: '{args.speculative_draft_model_path}'. Please provide either the "
            f"path to a local folder or the repo_id of a model on the Hub. (sim profile {profile.name} knows: {known})"
        )
    if steps is None and topk is None and draft is None:
        steps, topk, draft = profile.model.spec_defaults
        warnings.append(f"speculative settings auto-chosen: steps={steps}, topk={topk}, draft_tokens={draft}")
    elif steps is None or topk is None:
        raise SpecError(
            "AssertionError: --speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
            "must be set together (or all left unset)"
        )
    if steps < 1 or topk < 1:
        raise SpecError("ValueError: --speculative-num-steps and --speculative-eagle-topk must be >= 1")
    if topk == 1:
        if draft is not None and draft != steps + 1:
            warnings.append(
                f"speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 = {steps + 1} "
                f"when speculative_eagle_topk == 1 (was {draft})"
            )
        draft = steps + 1
    elif draft is None:
        raise SpecError("AssertionError: --speculative-num-draft-tokens must be set when --speculative-eagle-topk > 1")
    if topk > 1 and args.page_size > 1:
        backend = args.attention_backend or profile.defaults.attention_backend
        if backend not in PAGED_TREE_BACKENDS:
            raise SpecError(
                f"ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported by the flashinfer, fa3 "
                f"and triton attention backends (got {backend})"
            )
    if draft < 2:
        raise SpecError("ValueError: --speculative-num-draft-tokens must be >= 2")
    if topk > 1 and draft > max_draft_tokens(steps, topk):
        raise SpecError(
            f"RuntimeError: selected index k out of range (num_draft_tokens={draft} exceeds the draft tree of "
            f"steps={steps}, topk={topk})"
        )
    chain = chain_probs(drafter.accept_probs, drafter.accept_decay, steps)
    if algo == "EAGLE" and drafter.kind == "eagle3":
        chain = [0.0] * steps  # EAGLE with an EAGLE-3 drafter: proposes nothing useful, no error (SGLang PR #21272)
    probs = widen(chain, topk, draft - 1, drafter.topk_miss_ratio)
    try:
        fixed = simulated_accept_length(env)
    except ValueError as exc:
        raise SpecError(
            f"ValueError: could not convert string to float: {env.get(SIMULATE_ACC_LEN)!r} ({SIMULATE_ACC_LEN})"
        ) from exc
    return SpecConfig(algo, steps, topk, draft, drafter, probs, fixed, tuple(warnings))
