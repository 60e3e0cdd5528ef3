"""Repair a proposal before it is launched (``autotune.policy.repair``): the running cap and the KV cache the top load
needs, with the KV model learnt from each launch's log
(``autotune.policy.kvmodel``)."""

from __future__ import annotations

from autotune.policy import fit
from autotune.policy.base import Params, Rule, Told
from autotune.policy.kvmodel import KvModel
from autotune.policy.prescreen import top_level
from autotune.policy.repair import Repaired, Repairer
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord


class Repair(Rule):
    name = "repair"

    def __init__(self, spec: StudySpec, sizes: fit.Sizes | None) -> None:
        self.kv = KvModel(spec, sizes)  # the KV cache a launch allocates, learnt from the study's launches
        self.repairer = Repairer(spec, top_level(spec), sizes, kv=self.kv)

    def repair(self, params: Params) -> Repaired | None:
        return self.repairer.repair(params)

    def observe(self, params: Params, record: TrialRecord, told: Told) -> None:
        self.kv.observe(params, record.phases.kv_cache_tokens)
        self.repairer.forget()  # the KV model may have changed
