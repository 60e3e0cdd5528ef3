"""BenchPlan <-> JSON, as study.json stores a plan (``autotune.verify`` reads it back)."""

from __future__ import annotations

import json
from dataclasses import asdict

from autotune.bench.types import BenchPlan, WorkloadSpec


def plan_to_json(plan: BenchPlan) -> str:
    return json.dumps(asdict(plan))


def plan_from_json(text: str) -> BenchPlan:
    data = json.loads(text)
    data["workload"] = WorkloadSpec(**data["workload"])
    data["concurrencies"] = tuple(data["concurrencies"])
    return BenchPlan(**data)
