"""The chain speed-up model that orders the coordinate step's ``--speculative-num-steps`` moves."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.policy.specmodel import ChainSpeedup, acceptance_of, chain_accept_length, fit, order_steps
from autotune.space import load_study

ROOT = Path(__file__).resolve().parents[2]
CHAIN = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/models/public-k2-eagle3",
         "speculative_num_steps": 3, "speculative_eagle_topk": 1, "max_running_requests": 128,
         "mem_fraction_static": 0.85}


def test_acceptance_inverts_the_chain_accept_length() -> None:
    assert chain_accept_length(0.5, 3) == pytest.approx(1.875)
    for a in (0.1, 0.5, 0.8, 0.95):
        for k in (1, 3, 6):
            assert acceptance_of(chain_accept_length(a, k), k) == pytest.approx(a, abs=1e-9)
    assert acceptance_of(9.0, 3) == pytest.approx(1.0)  # beyond the chain's range: clamped


def test_fit_goes_through_the_measured_point() -> None:
    m = fit(3, 2.5, 1.6)
    assert m is not None
    assert m.accept_length(3) == pytest.approx(2.5)
    assert m.speedup(3) == pytest.approx(1.6)
    assert fit(3, 1.0, 1.2) is None  # every draft token rejected: says nothing about the steps
    assert fit(3, 2.5, 0.0) is None


def test_direction_follows_acceptance_and_cost() -> None:
    keen = fit(3, chain_accept_length(0.9, 3), 2.5)  # high acceptance, cheap drafting: a longer chain pays
    assert keen is not None and keen.speedup(4) > keen.speedup(2)
    poor = fit(3, chain_accept_length(0.3, 3), 1.05)  # the last draft token is rarely accepted: a shorter one pays
    assert poor is not None and poor.speedup(2) > poor.speedup(4)


def test_a_simulated_accept_length_is_capped_at_steps_plus_one() -> None:
    m = fit(3, 3.0, 2.0, simulated=3.0)  # SGLANG_SIMULATE_ACC_LEN=3: 2 steps accept as many tokens as 3 or 4
    assert m == ChainSpeedup(m.acceptance, 0.5 / 3, 3.0)
    assert m.accept_length(2) == 3.0 and m.accept_length(1) == 2.0
    assert m.speedup(2) > m.speedup(3) > m.speedup(4)


def test_order_steps_puts_the_predicted_faster_count_first() -> None:
    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    down, up = {**CHAIN, "speculative_num_steps": 2}, {**CHAIN, "speculative_num_steps": 4}
    poor = chain_accept_length(0.3, 3)
    assert order_steps(spec, CHAIN, 1050.0, poor, 1000.0, "speculative_num_steps", [up, down]) == [down, up]
    keen = chain_accept_length(0.9, 3)
    assert order_steps(spec, CHAIN, 2500.0, keen, 1000.0, "speculative_num_steps", [down, up]) == [up, down]
    # nothing to go on, or not the chain's step count: the order is left as it came
    assert order_steps(spec, CHAIN, 1050.0, None, 1000.0, "speculative_num_steps", [up, down]) == [up, down]
    assert order_steps(spec, CHAIN, 1050.0, poor, None, "speculative_num_steps", [up, down]) == [up, down]
    tree = {**CHAIN, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 6}
    assert order_steps(spec, tree, 1050.0, poor, 1000.0, "speculative_num_steps",
                       [{**tree, "speculative_num_steps": 4}, {**tree, "speculative_num_steps": 2}])[0][
        "speculative_num_steps"] == 4
    caps = [{**CHAIN, "max_running_requests": 64}, {**CHAIN, "max_running_requests": 256}]
    assert order_steps(spec, CHAIN, 1050.0, poor, 1000.0, "max_running_requests", caps) == caps


def test_order_steps_reads_the_studys_simulated_accept_length() -> None:
    spec = load_study(ROOT / "search_spaces" / "h200-tp1-speculative.yaml")  # SGLANG_SIMULATE_ACC_LEN: "3.0"
    start = {"speculative_algorithm": "EAGLE3", "speculative_draft_model_path": "/tmp/models/eagle3-llama-1b",
             "speculative_num_steps": 3, "speculative_eagle_topk": 1, "max_running_requests": 128,
             "mem_fraction_static": 0.82}
    down, up = {**start, "speculative_num_steps": 2}, {**start, "speculative_num_steps": 4}
    # a fitted chain would favour 4 steps here (acceptance 0.81, cheap drafting); SGLang's rule caps 4 steps at 3.0
    assert fit(3, 3.0, 2.7) is not None and fit(3, 3.0, 2.7).speedup(4) > fit(3, 3.0, 2.7).speedup(2)  # type: ignore[union-attr]
    assert order_steps(spec, start, 2700.0, 3.0, 1000.0, "speculative_num_steps", [up, down]) == [down, up]
