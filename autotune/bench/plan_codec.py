"""BenchPlan <-> JSON, as study.json stores a plan (``autotune.verify`` reads it back)."""

from __future__ import annotations

import json
from dataclasses import asdict

from autotune.bench.load import Load
from autotune.bench.types import SLO, BenchPlan, WorkloadSpec


def plan_to_json(plan: BenchPlan) -> str:
    return json.dumps(asdict(plan))


def plan_from_json(text: str) -> BenchPlan:
    data = json.loads(text)
    data["workload"] = WorkloadSpec(**data["workload"])
    data["concurrencies"] = tuple(data["concurrencies"])
    data["loads"] = tuple(Load(**x) for x in data.get("loads") or ())
    data["slo"] = SLO(**data["slo"]) if data.get("slo") else None
    return BenchPlan(**data)
