"""The rule contract: the first repair and the first reason win, seed points are asked only of the rules that apply to
seeds, every rule observes, a rule is removed by name; the study's rules in their order."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from autotune.policy.base import Params, Rule, Rules, Told, params_key
from autotune.policy.defaults import default_rules
from autotune.policy.repair import Repaired
from autotune.policy.repeats import Repeats
from autotune.space import load_study
from autotune.trial.records import TrialOutcome, TrialRecord

ROOT = Path(__file__).resolve().parents[2]


class Says(Rule):
    def __init__(self, name: str, reason: str | None = None, fix: Params | None = None) -> None:
        self.name = name  # type: ignore[misc]  # a test rule takes its name per instance
        self.reason, self.fix = reason, fix
        self.seen: list[Params] = []

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        return self.reason

    def repair(self, params: Params) -> Repaired | None:
        return Repaired(self.fix, (self.name,)) if self.fix is not None else None

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.seen.append(params)


def _record(number: int) -> TrialRecord:
    return TrialRecord(
        study="s", trial_id=f"t{number}", number=number, params={}, flags={}, env={}, argv=[],
        outcome=TrialOutcome.COMPLETE,
    )  # fmt: skip


def test_first_reason_and_first_repair_win_and_every_rule_observes() -> None:
    a, b, c = Says("a"), Says("b", "b says no", {"x": 2}), Says("c", "c says no", {"x": 3})
    rules = Rules([a, b, c])
    assert rules.set_aside({"x": 1}, set()) == "b says no"
    fixed = rules.repair({"x": 1})
    assert fixed is not None and fixed.params == {"x": 2}
    rules.observe({"x": 1}, _record(0), Told(0, [1.0], {}))
    assert a.seen == b.seen == c.seen == [{"x": 1}]
    assert rules.without("b").set_aside({"x": 1}, set()) == "c says no"
    with pytest.raises(ValueError, match="no rule named d"):
        rules.without("d")


def test_seed_points_are_asked_only_of_rules_that_apply_to_seeds() -> None:
    repeats = Repeats()
    rules = Rules([repeats, Says("screen", "screened")])
    assert rules.set_aside({"x": 1}, set(), seeded=True) is None
    assert rules.set_aside({"x": 1}, {params_key({"x": 1})}, seeded=True) == "repeats a running trial"
    repeats.restore({"x": 1}, Told(4, [1.0], {}))
    assert rules.set_aside({"x": 1}, set(), seeded=True) == "repeats trial 4"
    assert rules.set_aside({"x": 2}, set()) == "screened"


def test_the_studys_rules_in_order() -> None:
    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    assert default_rules(spec, None).names() == ["repeats", "new-cells", "learned", "repair", "rejected-flags", "defer"]
