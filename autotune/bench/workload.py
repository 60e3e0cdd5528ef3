"""Workloads (kept for imports): the kinds live in ``autotune/bench/workloads/``, one module per kind."""

from __future__ import annotations

from autotune.bench.workloads import BenchRequest, build_requests, build_units, check_jsonl, check_workload
from autotune.bench.workloads.random_ids import MIN_TOKEN_ID

__all__ = ["MIN_TOKEN_ID", "BenchRequest", "build_requests", "build_units", "check_jsonl", "check_workload"]
