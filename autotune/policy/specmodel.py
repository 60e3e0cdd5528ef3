"""Which way the coordinate step moves ``--speculative-num-steps`` first: the speed-up of chain speculative decoding as
the study measured it.

With top-k 1 the drafter proposes a chain of k tokens per verify step, and SGLang accepts L(k) tokens per step on
average:

- under ``SGLANG_SIMULATE_ACC_LEN=x`` (dummy weights: a study of the serving path) L(k) = min(x, k + 1), SGLang's rule;
- else, each draft token accepted with probability a once the one before it was, L(k) = 1 + a + ... + a^k (Leviathan
  et al., 2023); a is solved from the accept length measured at the point's own k.

A verify step of k draft tokens costs about 1 + c*k decode steps of the target alone (k draft forwards, and a verify of
k + 1 tokens a request, both about linear in k), so the throughput over the throughput without speculation is
L(k) / (1 + c*k). One measured chain point (accept length L at k steps, throughput T) and the best point measured
without speculation (T_off) give c = (L * T_off / T - 1) / k. The model only orders the step's candidates (k - 1 and
k + 1 are both still tried, the better predicted first); it sets no point aside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.core.errors import SpaceError
from autotune.engines import sglang_rules
from autotune.engines.sglang_facts import simulated_accept_length
from autotune.policy.learned import BROKEN_ACCEPT
from autotune.space import StudySpec, to_trial_config


def chain_accept_length(acceptance: float, steps: int) -> float:
    """1 + a + a^2 + ... + a^steps: the tokens a verify step yields when each draft token is accepted with
    probability ``acceptance`` once the one before it was."""
    return sum(acceptance ** i for i in range(steps + 1))


def acceptance_of(accept_length: float, steps: int) -> float:
    """The per-token acceptance a in [0, 1] whose chain of ``steps`` yields ``accept_length`` (clamped to the chain's
    range [1, steps + 1])."""
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if chain_accept_length(mid, steps) < accept_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class ChainSpeedup:
    """Throughput with a chain of k draft tokens over the throughput without speculation: L(k) / (1 + cost * k)."""

    acceptance: float  # per draft token, once the one before it was accepted (unused when ``simulated`` is set)
    cost: float  # a draft step's cost (drafting and verifying one more token), in decode steps of the target alone
    simulated: float | None = None  # SGLANG_SIMULATE_ACC_LEN: L(k) = min(x, k + 1)

    def accept_length(self, steps: int) -> float:
        if self.simulated is not None:
            return min(max(self.simulated, 1.0), steps + 1.0)
        return chain_accept_length(self.acceptance, steps)

    def speedup(self, steps: int) -> float:
        return self.accept_length(steps) / (1.0 + self.cost * steps)


def fit(steps: int, accept_length: float, speedup: float, simulated: float | None = None) -> ChainSpeedup | None:
    """The model through one measured chain point (``speedup``: its throughput over the best without speculation);
    None when the point says nothing about speculation (a drafter that accepts nothing, ``BROKEN_ACCEPT``, or no
    positive speed-up)."""
    if steps < 1 or accept_length <= BROKEN_ACCEPT or speedup <= 0:
        return None
    model = ChainSpeedup(acceptance_of(accept_length, steps), 0.0, simulated)
    cost = max((model.accept_length(steps) / speedup - 1.0) / steps, 0.0)
    return ChainSpeedup(model.acceptance, cost, simulated)


def chain_steps(flags: Mapping[str, Any]) -> int | None:
    """The step count of an EAGLE-family chain (top-k 1 set explicitly) from a trial's SGLang flags, else None."""
    if sglang_rules.algorithm(flags) in (None, "NGRAM"):
        return None
    steps, topk = flags.get(sglang_rules.STEPS), flags.get(sglang_rules.TOPK)
    return steps if isinstance(steps, int) and not isinstance(steps, bool) and topk == 1 else None


def _chain_steps(spec: StudySpec, params: Mapping[str, Any]) -> tuple[int, dict[str, str]] | None:
    """(steps, env) of a chain point of the study (``chain_steps``), or None."""
    try:
        tc = to_trial_config(spec, dict(params))
    except SpaceError:
        return None
    steps = chain_steps(tc.flags)
    return (steps, dict(tc.env)) if steps is not None else None


def sets_steps(spec: StudySpec, param: str) -> bool:
    """Whether ``param`` sets ``--speculative-num-steps``."""
    return any(q.name == param and q.flag == sglang_rules.STEPS for q in spec.params)


def is_off(spec: StudySpec, params: Mapping[str, Any]) -> bool:
    """Whether the point runs without speculation."""
    try:
        return sglang_rules.algorithm(to_trial_config(spec, dict(params)).flags) is None
    except SpaceError:
        return False


def order_steps(spec: StudySpec, best: Mapping[str, Any], best_value: float, best_accept: float | None,
                off_value: float | None, param: str, candidates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``candidates`` (``best`` with ``param`` changed) with the predicted faster step count first, when ``param``
    sets ``--speculative-num-steps`` of a chain point whose accept length and throughput were measured and a point
    without speculation was measured feasibly (``off_value``, same objective, maximised); else unchanged."""
    here = _chain_steps(spec, best)
    if (not sets_steps(spec, param) or here is None or best_accept is None or not off_value
            or off_value <= 0 or spec.objectives[0].direction != "maximize"):
        return list(candidates)
    steps, env = here
    try:
        simulated = simulated_accept_length(env)
    except ValueError:
        simulated = None
    model = fit(steps, best_accept, best_value / off_value, simulated)
    if model is None:
        return list(candidates)

    def predicted(cand: dict[str, Any]) -> float:
        k = cand.get(param)
        return model.speedup(k) if isinstance(k, int) and not isinstance(k, bool) else 0.0

    return sorted(candidates, key=predicted, reverse=True)  # stable: ties keep the random order
