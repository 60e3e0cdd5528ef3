"""Repair a proposal before it is launched (``autotune.policy.repair``): the running cap and the KV cache the top load
needs, with the KV model learnt from each launch's log (``autotune.policy.kvmodel``).

The repair's premise is that a point should run the top load at once. Where the study's launches say otherwise (a
per-token latency bound that a full batch breaks, so that only a lower cap or a smaller cache meets it), the repair
stands aside: once ``FULL_LOAD_LAUNCHES`` completed launches of points it leaves as they are (they hold the top load at
once) were measured and none met the study's constraints, proposals are launched as proposed, and the cap and the
memory fraction are searched like any other parameter. It repairs again as soon as such a launch meets them."""

from __future__ import annotations

from autotune.policy import fit
from autotune.policy.base import Params, Rule, Told
from autotune.policy.kvmodel import KvModel
from autotune.policy.prescreen import top_level
from autotune.policy.repair import Repaired, Repairer
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord

FULL_LOAD_LAUNCHES = 5  # launches holding the top load, none feasible, before the repair stands aside


class Repair(Rule):
    name = "repair"

    def __init__(self, spec: StudySpec, sizes: fit.Sizes | None) -> None:
        self.kv = KvModel(spec, sizes)  # the KV cache a launch allocates, learnt from the study's launches
        self.repairer = Repairer(spec, top_level(spec), sizes, kv=self.kv)
        self.full_load = 0  # completed launches of points holding the top load at once
        self.full_load_feasible = 0  # ... that met every constraint

    @property
    def standing_aside(self) -> bool:
        return self.full_load >= FULL_LOAD_LAUNCHES and not self.full_load_feasible

    def repair(self, params: Params) -> Repaired | None:
        return None if self.standing_aside else self.repairer.repair(params)

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self._count(params, told)  # by the KV model before this launch corrects it
        self.kv.observe(params, record.phases.kv_cache_tokens)
        self.repairer.forget()  # the KV model may have changed

    def restore(self, params: Params, told: Told) -> None:
        self._count(params, told)

    def note(self) -> str | None:
        if not self.standing_aside:
            return None
        return (
            f"the repair stood aside: none of the {self.full_load} launches that ran the top load "
            f"({self.repairer.top}) at once met the constraints, so caps and memory fractions were launched as proposed"
        )

    def _count(self, params: Params, told: Told) -> None:
        if told.failure is None and self.repairer.repair(dict(params)) is None:
            self.full_load += 1
            self.full_load_feasible += told.feasible
