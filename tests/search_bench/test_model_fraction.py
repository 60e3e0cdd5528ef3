"""Round 22's candidate (``benchmarks.search.model_fraction``): the sampler's proposals at the model's fraction."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method
from benchmarks.search.model_fraction import ModelFraction


def test_a_moved_proposal_keeps_its_cell_and_takes_another_fraction(monkeypatch: Any) -> None:
    moves: list[tuple[dict[str, Any], dict[str, Any]]] = []
    skip, ask = ModelFraction._skip, ModelFraction._ask_fixed
    pending: dict[str, Any] = {}

    def _skip(self: ModelFraction, trial: Any, key: str, reason: str) -> None:
        if reason.startswith("model-fraction"):
            pending["from"] = json.loads(key)
        skip(self, trial, key, reason)

    def _ask_fixed(self: ModelFraction, params: Any) -> Any:
        if "from" in pending:
            moves.append((pending.pop("from"), dict(params)))
        return ask(self, params)

    monkeypatch.setattr(ModelFraction, "_skip", _skip)
    monkeypatch.setattr(ModelFraction, "_ask_fixed", _ask_fixed)
    land = FamilyLandscape(load_space("h200-tp1-speculative"), "memory-shapes", 0)
    run_method(land, family_optimum(land).value, "model-fraction", seed=0, noise=0.04, launches=20)
    assert moves
    for before, after in moves:
        assert before["mem_fraction_static"] != after["mem_fraction_static"]
        assert {k: v for k, v in before.items() if k != "mem_fraction_static"} == {
            k: v for k, v in after.items() if k != "mem_fraction_static"
        }


def test_without_a_real_valued_parameter_it_is_the_searcher() -> None:
    land = FamilyLandscape(load_space("h200x2-tp2-nccl"), "needle", 0)
    best = family_optimum(land).value
    ours = run_method(land, best, "model-fraction", seed=1, noise=0.04, launches=12)
    theirs = run_method(land, best, "autotune", seed=1, noise=0.04, launches=12)
    assert ours["ratios"] == theirs["ratios"] and ours["launched"] == theirs["launched"]
