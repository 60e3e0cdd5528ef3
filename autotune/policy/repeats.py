"""Set aside a proposal that repeats a measured or running point: the searcher answers it from the earlier result.

Copies of one result would fill TPE's "good" group with one point and keep it proposing that point, and every launch
costs minutes, so a point is launched once. The study's own seed points are set aside by it too."""

from __future__ import annotations

from collections.abc import Collection

from autotune.policy.base import Params, Rule, Told, params_key
from autotune.trial.records import TrialRecord


class Repeats(Rule):
    name = "repeats"
    applies_to_seeds = True

    def __init__(self) -> None:
        self.measured: dict[str, Told] = {}  # point -> what the sampler was told of it

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        key = params_key(params)
        if key in self.measured:
            return f"repeats trial {self.measured[key].number}"
        if key in running:
            return "repeats a running trial"
        return None

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.measured[params_key(params)] = told

    def restore(self, params: Params, told: Told) -> None:
        self.measured[params_key(params)] = told
