"""What a study's own measurements say about points not launched yet: the searcher sets such points aside.

**A drafter that accepts nothing.** A trial measured with an accept length of at most ``BROKEN_ACCEPT`` at every load
level (SGLang reports it per request) used a drafter whose draft tokens are all rejected: every other point with that
drafter under that algorithm pays the drafting cost for nothing (the user story's custom drafter: accept length 1.00).
NGRAM has no draft model: its drafter is its n-gram store (a store too small to keep n-grams accepts nothing either).
Simulated acceptance (``SGLANG_SIMULATE_ACC_LEN``) is never taken as evidence.

Set-asides learnt from launches that failed for memory (graph capture above a fraction, OOM at load below one) were
removed after they changed no run on issue #29's landscape families (``docs/decisions/0011-round-4-issue-29.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.errors import SpaceError
from autotune.engines import engine_model
from autotune.space import StudySpec, to_trial_config
from autotune.trial.records import TrialRecord

BROKEN_ACCEPT = 1.05


class Learned:
    def __init__(self, spec: StudySpec) -> None:
        self.spec = spec
        self.model = engine_model(spec.engine)
        self.broken: dict[str, float] = {}  # drafter -> the accept length that showed it accepts nothing

    def observe(self, params: Mapping[str, Any], record: TrialRecord) -> float | None:
        """Learn from a finished trial (a drafter that accepted nothing); returns the highest accept length it measured
        (None: none reported, or simulated)."""
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
        """What drafts for this point: the draft model's path with the algorithm that runs it (a drafter accepts
        nothing under the wrong algorithm, e.g. EAGLE with an EAGLE-3 drafter, and may under the right one), or without
        one what the engine drafts from (``EngineModel.draft_store``: NGRAM's n-gram store); None without speculation,
        whatever draft model path the point names."""
        try:
            flags = to_trial_config(self.spec, dict(params)).flags
        except SpaceError:
            return None
        algorithm = self.model.speculation(flags)
        if algorithm is None:
            return None
        drafter = self.model.drafter(flags)
        return f"{drafter} ({algorithm})" if drafter is not None else self.model.draft_store(flags)

    def reason(self, params: Mapping[str, Any]) -> str | None:
        """Why the study's own results say this point is not worth a launch now (None: no such reason)."""
        drafter = self.drafter(params)
        if drafter is not None and drafter in self.broken:
            return f"drafter {drafter} accepted no draft token when measured (accept length {self.broken[drafter]:.2f})"
        return None
