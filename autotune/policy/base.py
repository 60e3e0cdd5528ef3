"""The contract of a rule of what to launch, and ``Rules``, the ordered list of them a searcher holds.

A rule is consulted by the searcher and its proposer (``autotune.study.searcher``, ``autotune.study.proposer``) at a
few points of a proposal's life, and overrides only the hooks it decides; every default decides nothing, as Optuna's
``BaseSampler`` hooks do. Behaviour is added by adding a rule to the list (``autotune.policy.defaults``), as Ray Tune
adds it by wrapping a ``Searcher`` (``ConcurrencyLimiter``, ``Repeater``); neither the searcher nor the proposer
changes.

- ``repair(params)``: the proposal changed to what the load being optimised needs, or None;
- ``set_aside(params, running)``: why the point is not worth a launch now, or None (launch it); the study's own seed
  points are asked only of rules with ``applies_to_seeds``;
- ``observe(params, record, told)``: learn from a finished trial, after its record is stored and before the sampler is
  told, and again from the stored record when a study resumes; ``restore(params, told)``: the same from what the
  Optuna study holds, for a resumed trial without a stored record;
- ``stop(record)``: why the study should start no further trial (every one would fail the same way), or None;
- ``deferred()``: seed points launched last, after the search;
- ``note()``: what the rule did that the user should read at the end of the search, or None;
- ``relax()``: stop setting proposals aside because nothing else is left to launch; True when that changes anything.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from autotune.core.failures import FailureKind
from autotune.policy.repair import Repaired
from autotune.space.values import params_key as params_key  # a point's identity, for the rules and the proposer
from autotune.trial.records import TrialRecord

Params = dict[str, Any]


@dataclass(frozen=True)
class Told:
    """What the sampler was told of a launched point: objective values, constraints (``<= 0`` feasible) and the
    failure kind of a failed launch."""

    number: int
    values: list[float]
    constraints: dict[str, float]
    failure: FailureKind | None = None

    @property
    def feasible(self) -> bool:
        return all(v <= 0 for v in self.constraints.values())


class Rule:
    """One rule of what to launch. Subclasses override the hooks they decide (module docstring)."""

    name: ClassVar[str] = ""  # how the rule is named where it is removed or listed (``Rules.without``)
    applies_to_seeds: ClassVar[bool] = False  # whether the study's own seed points are set aside by it too

    def repair(self, params: Params) -> Repaired | None:
        return None

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        """``running``: the keys (``params_key``) of the points running now."""
        return None

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        return None

    def restore(self, params: Params, told: Told) -> None:
        return None

    def stop(self, record: TrialRecord) -> str | None:
        return None

    def deferred(self) -> list[Params]:
        return []

    def note(self) -> str | None:
        return None

    def relax(self) -> bool:
        return False


class Rules:
    """The rules a searcher consults, in order: the first repair and the first reason win; every rule observes."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = tuple(rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    def without(self, *names: str) -> Rules:
        """These rules less the named ones (a rule removed by name, e.g. by a benchmark's ablation)."""
        unknown = set(names) - set(self.names())
        if unknown:
            raise ValueError(f"no rule named {', '.join(sorted(unknown))}; the rules are {', '.join(self.names())}")
        return Rules(r for r in self.rules if r.name not in names)

    def repair(self, params: Params) -> Repaired | None:
        for rule in self.rules:
            fixed = rule.repair(params)
            if fixed is not None:
                return fixed
        return None

    def set_aside(self, params: Params, running: Collection[str], *, seeded: bool = False) -> str | None:
        for rule in self.rules:
            if seeded and not rule.applies_to_seeds:
                continue
            reason = rule.set_aside(params, running)
            if reason:
                return reason
        return None

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        for rule in self.rules:
            rule.observe(params, record, told)

    def restore(self, params: Params, told: Told) -> None:
        for rule in self.rules:
            rule.restore(params, told)

    def stop(self, record: TrialRecord) -> str | None:
        for rule in self.rules:
            reason = rule.stop(record)
            if reason:
                return reason
        return None

    def deferred(self) -> list[Params]:
        return [p for rule in self.rules for p in rule.deferred()]

    def relax(self) -> bool:
        return any([rule.relax() for rule in self.rules])  # a list, not a generator: every rule relaxes

    def notes(self) -> list[str]:
        return [n for rule in self.rules if (n := rule.note())]
