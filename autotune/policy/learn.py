"""Set aside what the study's own results rule out (``autotune.policy.learned``: a drafter that accepts nothing),
learnt from each finished trial."""

from __future__ import annotations

from collections.abc import Collection

from autotune.policy.base import Params, Rule, Told
from autotune.policy.learned import Learned
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord


class Learn(Rule):
    name = "learned"

    def __init__(self, spec: StudySpec) -> None:
        self.learned = Learned(spec)

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        return self.learned.reason(params)

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.learned.observe(params, record)
