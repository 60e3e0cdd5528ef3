"""Contract tests: the simulator and the pre-launch rules agree on generated configurations, and the simulator's log
lines parse with the real parser. Each check also fails on a deliberately broken copy of either side."""

from __future__ import annotations

import re

import pytest

from autotune.engines import base, sglang_rules
from autotune.sim import launch_log
from autotune.sim import spec as sim_spec
from tests.engines.sglang_contract import (
    Case,
    log_mismatches,
    nccl_cases,
    rule_mismatches,
    rules_reject,
    speculative_cases,
)

EAGLE3 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "dummy-eagle3"}
LOG_CASES = (
    Case({}),
    Case({**EAGLE3, "speculative-num-steps": 3, "speculative-eagle-topk": 1}),
    Case({"speculative-algorithm": "NGRAM"}),
    Case({"disable-cuda-graph": True}),
    Case({"cuda-graph-max-bs": 8, "max-running-requests": 16}, tp_size=2, profile="h200x2-llama-8b"),
)
# a few configurations each side refuses for its own reason, to keep the broken-copy tests fast
TREE_CASES = (
    Case({**EAGLE3, "speculative-num-steps": 2, "speculative-eagle-topk": 4, "speculative-num-draft-tokens": 32}),
    Case(
        {
            **EAGLE3,
            "speculative-num-steps": 3,
            "speculative-eagle-topk": 2,
            "speculative-num-draft-tokens": 4,
            "page-size": 16,
            "attention-backend": "torch_native",
        }
    ),
    Case({**EAGLE3, "speculative-num-steps": 3, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 8}),
)


def test_rules_and_simulator_agree_on_speculative_configs() -> None:
    cases = list(speculative_cases())
    refused = sum(bool(rules_reject(c)) for c in cases[::10])
    assert len(cases) > 5000 and 0.1 < refused / len(cases[::10]) < 0.9, "the generated set has both outcomes"
    assert rule_mismatches(iter(cases)) == []


def test_rules_and_simulator_agree_on_nccl_settings() -> None:
    cases = list(nccl_cases())
    assert any(rules_reject(c) for c in cases) and not all(rules_reject(c) for c in cases)
    assert rule_mismatches(iter(cases)) == []


def test_simulator_log_lines_parse_with_the_real_parser() -> None:
    assert log_mismatches(iter(LOG_CASES)) == []


def test_a_broken_pre_launch_rule_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    assert rule_mismatches(iter(TREE_CASES)) == []
    monkeypatch.setattr(sglang_rules, "PAGED_TREE_BACKENDS", ("flashinfer", "fa3", "triton", "torch_native"))
    found = rule_mismatches(iter(TREE_CASES))
    assert len(found) == 1 and "torch_native" in found[0] and "sim:" in found[0]


def test_a_broken_simulator_rule_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim_spec, "max_draft_tokens", lambda steps, topk: 10**6)  # the sim forgets the tree's size
    found = rule_mismatches(iter(TREE_CASES))
    assert len(found) == 1 and "--speculative-num-draft-tokens 32" in found[0] and "rules:" in found[0]


def test_a_broken_log_pattern_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    patterns = dict(base.LOG_PATTERNS)
    patterns["kv_tokens"] = re.compile(r"KV Cache is allocated\..*#tokens=(\d+)")  # expects '=' where SGLang writes ':'
    monkeypatch.setattr(base, "LOG_PATTERNS", patterns)
    found = log_mismatches(iter(LOG_CASES[:1]))
    assert len(found) == 1 and "kv_cache_tokens=None" in found[0]


def test_a_broken_simulator_log_line_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    real = launch_log.Logger.__call__

    def reworded(self, msg: str, rank: str = "") -> None:  # type: ignore[no-untyped-def]
        real(self, msg.replace("Capture cuda graph end. Time elapsed:", "Capture cuda graph done in"), rank)

    monkeypatch.setattr(launch_log.Logger, "__call__", reworded)
    found = log_mismatches(iter(LOG_CASES[:1]))
    assert len(found) == 1 and "graph_capture_s=None" in found[0]
