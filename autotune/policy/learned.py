"""What a study's own measurements say about points not launched yet: the searcher sets such points aside.

**A drafter that accepts nothing.** A trial measured with an accept length of at most ``BROKEN_ACCEPT`` at every load
level (SGLang reports it per request) used a drafter whose draft tokens are all rejected: every other point with that
drafter pays the drafting cost for nothing (the user story's custom drafter: accept length 1.00). NGRAM has no draft
model: its drafter is its n-gram store (a store too small to keep n-grams accepts nothing either). Simulated
acceptance (``SGLANG_SIMULATE_ACC_LEN``) is never taken as evidence.

**Memory that did not fit.** A launch that failed at CUDA-graph capture with memory fraction f left too
little memory outside the static pool for its graphs: every point with a fraction of at least f and at least as many
graph tokens (running cap x tokens a request in the graphs) fails the same way, so it is set aside, and the repair
(``autotune.policy.repair``) stays below f. A launch that failed out of memory at load (the weights leave no KV cache)
rules out every fraction up to f with at least its weights (the same drafter or a larger one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.errors import SpaceError
from autotune.core.failures import FailureKind
from autotune.engines import engine_model
from autotune.space import StudySpec, to_trial_config
from autotune.trial.records import TrialOutcome, TrialRecord

BROKEN_ACCEPT = 1.05
UNCAPPED = 1 << 20  # graph batch of a point without a running cap: above any real one


class Learned:
    def __init__(self, spec: StudySpec) -> None:
        self.spec = spec
        self.model = engine_model(spec.engine)
        self.graph_failures: list[tuple[float, int]] = []  # (memory fraction, graph tokens) of capture failures
        self.load_failures: list[tuple[float, float]] = []  # (memory fraction, drafter weight rank) of OOM at load
        self.drafter_param = next((p.name for p in spec.params if p.flag == self.model.drafter_flag), None)
        self.broken: dict[str, float] = {}  # drafter -> the accept length that showed it accepts nothing

    def _memory_shape(self, params: Mapping[str, Any]) -> tuple[float, int, float] | None:
        """(memory fraction, graph tokens, drafter rank) of a point, or None when it sets no fraction."""
        try:
            flags = to_trial_config(self.spec, params).flags
        except SpaceError:
            return None
        frac = flags.get(self.model.memory_fraction_flag)
        if not isinstance(frac, (int, float)) or isinstance(frac, bool):
            return None
        cap = self.model.running_cap(flags)
        graph = cap if cap is not None else UNCAPPED
        for name in self.model.graph_ceiling_flags:
            bs = flags.get(name)
            if isinstance(bs, int) and not isinstance(bs, bool):
                graph = min(graph, bs)
        speculative = self.model.speculation(flags) is not None
        per_request = self.model.graph_tokens_per_request(flags)
        drafter = 1.0 if speculative else 0.0
        return float(frac), graph * per_request, drafter

    def observe_failure(self, params: Mapping[str, Any], failure: FailureKind | None) -> None:
        shape = self._memory_shape(params)
        if shape is None:
            return
        frac, graph, drafter = shape
        if failure is FailureKind.GRAPH_CAPTURE_FAILED:
            self.graph_failures.append((frac, graph))
        elif failure is FailureKind.OOM_AT_LAUNCH:
            self.load_failures.append((frac, drafter))

    def memory_ceiling(self, params: Mapping[str, Any]) -> float | None:
        """The lowest memory fraction the study's launches showed too high for a point like this (None: none)."""
        shape = self._memory_shape(params)
        if shape is None:
            return None
        _, graph, _ = shape
        fracs = [f for f, g in self.graph_failures if graph >= g]
        return min(fracs) if fracs else None

    def memory_reason(self, params: Mapping[str, Any]) -> str | None:
        shape = self._memory_shape(params)
        if shape is None:
            return None
        frac, graph, drafter = shape
        for f, g in self.graph_failures:
            if frac >= f and graph >= g:
                return (
                    f"a launch with --{self.model.memory_fraction_flag} {f:g} and fewer CUDA-graph tokens failed at graph capture;"
                    f" this point has {frac:g}"
                )
        for f, d in self.load_failures:
            if frac <= f and drafter >= d:
                return f"a launch with --{self.model.memory_fraction_flag} {f:g} failed out of memory at load; this point has {frac:g}"
        return None

    def observe(self, params: Mapping[str, Any], record: TrialRecord) -> float | None:
        """Learn from a finished trial (a launch that failed for memory, a drafter that accepted nothing); returns the
        highest accept length it measured (None: none reported, or simulated)."""
        if record.outcome is TrialOutcome.FAILED:
            self.observe_failure(params, record.failure)
        if record.bench is None or self.model.sets_simulated_acceptance(record.env):
            return None
        accepts = [lv.accept_length for lv in record.bench.levels if lv.accept_length is not None]
        if not accepts:
            return None
        drafter = self.drafter(params)
        if drafter is not None and max(accepts) <= BROKEN_ACCEPT:
            self.broken[drafter] = max(accepts)
        return max(accepts)

    def drafter(self, params: Mapping[str, Any]) -> str | None:
        """What drafts for this point: the draft model's path, or without one what the engine drafts from
        (``EngineModel.draft_store``: NGRAM's n-gram store); None without speculation."""
        drafter = params.get(self.drafter_param) if self.drafter_param else None
        if drafter is not None:
            return str(drafter)
        try:
            flags = to_trial_config(self.spec, dict(params)).flags
        except SpaceError:
            return None
        return self.model.draft_store(flags)

    def reason(self, params: Mapping[str, Any]) -> str | None:
        """Why the study's own results say this point is not worth a launch now (None: no such reason)."""
        drafter = self.drafter(params)
        if drafter is not None and drafter in self.broken:
            return f"drafter {drafter} accepted no draft token when measured (accept length {self.broken[drafter]:.2f})"
        return self.memory_reason(params)
