"""Round 11's candidate (issue #29): the repair stands aside while the study's launches say its premise is wrong.

The repair (``autotune.policy.repairing``) gives a proposal the running cap and the KV cache the top load needs, so that
every launch runs the top load at once. Where a constraint breaks whenever the top load runs at once (a per-token
latency bound a large batch breaks), no repaired launch can meet it, and the points that can (a lower cap, or a cache
that holds fewer requests) are never launched. ``EvidenceRepair`` counts the completed launches of points the repair
would leave as they are (they hold the top load at once by its arithmetic); once ``FULL_LAUNCHES`` of them are measured
and none met the study's constraints, it repairs nothing, and it repairs again as soon as one does.
"""

from __future__ import annotations

from typing import Any

from autotune.policy.base import Params, Rules, Told
from autotune.policy.repair import Repaired
from autotune.policy.repairing import Repair
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord

FULL_LAUNCHES = 5  # launches holding the top load, none feasible, before the repair stands aside


class EvidenceRepair(Repair):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.full = 0  # completed launches that held the top load at once
        self.full_feasible = 0  # ... and met every constraint

    @property
    def standing_aside(self) -> bool:
        return self.full >= FULL_LAUNCHES and self.full_feasible == 0

    def repair(self, params: Params) -> Repaired | None:
        return None if self.standing_aside else super().repair(params)

    def _count(self, params: Params, told: Told) -> None:
        if told.failure is None and self.repairer.repair(dict(params)) is None:
            self.full += 1
            self.full_feasible += told.feasible

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self._count(params, told)  # by the KV model before this launch corrects it
        super().observe(params, record, told)

    def restore(self, params: Params, told: Told) -> None:
        self._count(params, told)


def with_evidence_repair(spec: StudySpec, rules: Rules) -> Rules:
    """The rules with the repair replaced by ``EvidenceRepair`` (its place in the order, the same memory sizes)."""
    return Rules(EvidenceRepair(spec, r.repairer.sizes) if isinstance(r, Repair) else r for r in rules)
