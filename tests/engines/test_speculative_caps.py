"""Speculative trials set the running cap and the CUDA-graph ceiling together; NGRAM's store rule; accept_source."""

from __future__ import annotations

from pathlib import Path

from autotune.engines.sglang_facts import accept_source
from autotune.engines.sglang_rules import tie_speculative_caps, violations

NGRAM = {"speculative-algorithm": "NGRAM"}


def test_neither_given_both_become_the_highest_load_level() -> None:
    out = tie_speculative_caps(NGRAM, 64)
    assert out["max-running-requests"] == 64 and out["cuda-graph-max-bs-decode"] == 64


def test_one_given_sets_the_other() -> None:
    assert tie_speculative_caps({**NGRAM, "max-running-requests": 128}, 64)["cuda-graph-max-bs-decode"] == 128
    out = tie_speculative_caps({**NGRAM, "cuda-graph-max-bs": 96}, 64)
    assert out["max-running-requests"] == 96 and "cuda-graph-max-bs-decode" not in out
    both = {**NGRAM, "max-running-requests": 32, "cuda-graph-max-bs-decode": 16}
    assert tie_speculative_caps(both, 64) == both  # explicit values are the study's


def test_points_without_speculation_are_unchanged() -> None:
    assert tie_speculative_caps({"mem-fraction-static": 0.8}, 64) == {"mem-fraction-static": 0.8}
    assert tie_speculative_caps({"speculative-algorithm": None}, 64) == {"speculative-algorithm": None}


def test_the_runner_ties_them_in_a_study_that_asks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from autotune.policy.prescreen import launched_config
    from autotune.space import load_study
    from tests.study.test_searcher import ngram_space

    spec = ngram_space(tmp_path)
    cfg = launched_config(
        spec,
        {
            "speculative_algorithm": "NGRAM",
            "speculative_num_draft_tokens": 4,
            "speculative_ngram_max_bfs_breadth": 1,
            "speculative_ngram_max_trie_depth": 18,
            "speculative_ngram_capacity": 10000000,
        },
    )
    assert cfg.flags["max-running-requests"] == 32 and cfg.flags["cuda-graph-max-bs-decode"] == 32
    assert "max-running-requests" not in launched_config(spec, {"speculative_algorithm": None}).flags
    legacy = load_study("search_spaces/speculative.yaml")  # speculative_caps: sglang-default keeps SGLang's 48
    point = dict(legacy.points_to_evaluate[1])
    assert "max-running-requests" not in launched_config(legacy, {**point, "max_running_requests": None}).flags


def test_an_ngram_store_smaller_than_its_window_is_invalid() -> None:
    bad = violations({**NGRAM, "speculative-ngram-capacity": 8}, {}, tp_size=1)
    assert bad and "--speculative-ngram-capacity 8" in bad[0] and "Fix:" in bad[0]
    assert violations({**NGRAM, "speculative-ngram-capacity": 64}, {}, tp_size=1) == []
    assert (
        violations({**NGRAM, "speculative-ngram-capacity": 4, "speculative-ngram-max-trie-depth": 4}, {}, tp_size=1)
        == []
    )


def test_accept_source_says_measured_or_simulated() -> None:
    assert accept_source({}, {}, False) is None
    assert accept_source(NGRAM, {}, False) == "measured"
    assert accept_source(NGRAM, {}, True) == "simulated"
    assert accept_source({"speculative-algorithm": "EAGLE3"}, {"SGLANG_SIMULATE_ACC_LEN": "3.0"}, False) == "simulated"


def test_the_seed_screen_reads_the_tied_cap_and_launches_no_twin(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """With ``speculative_caps: tie`` the user's speculative seed without --max-running-requests launches with the cap at
    the highest load level (128). The seed screen read SGLang's 48 instead: it added a twin with the cap lifted to
    128 (the very same launch: a wasted one) and put the user's own seed last. Now it reads the flags as launched."""
    import yaml

    from autotune.policy import prescreen
    from autotune.policy.prescreen import launched_config
    from autotune.space import load_study

    doc = yaml.safe_load(Path("search_spaces/speculative.yaml").read_text())
    doc["study"]["speculative_caps"] = "tie"
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_study(path)
    seed = dict(spec.points_to_evaluate[0])
    assert seed["speculative_algorithm"] == "EAGLE3" and seed["max_running_requests"] is None
    assert launched_config(spec, seed).flags["max-running-requests"] == 128
    assert prescreen.uncapped_seeds(spec) == [] and prescreen.capped_seeds(spec) == []
    assert prescreen.seeds_now(spec, None) == [dict(p) for p in spec.points_to_evaluate]
