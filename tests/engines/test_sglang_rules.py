"""SGLang's validity rules: each rule with a point it accepts and a point it rejects, and ``normalize``."""

from __future__ import annotations

import pytest

from autotune.engines import sglang_rules as rules

EAGLE3 = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/drafter"}


def spec(**flags: object) -> dict[str, object]:
    """EAGLE3 with a drafter, plus ``flags`` (underscores in keyword names become dashes)."""
    return {**EAGLE3, **{k.replace("_", "-"): v for k, v in flags.items()}}


def only(flags: dict[str, object], env: dict[str, str] | None = None, tp: int = 1) -> str:
    """The single violation of a point (fails the test when there is not exactly one)."""
    found = rules.violations(flags, env or {}, tp_size=tp)
    assert len(found) == 1, found
    assert "Fix:" in found[0]
    return found[0]


def ok(flags: dict[str, object], env: dict[str, str] | None = None, tp: int = 1) -> None:
    assert rules.violations(flags, env or {}, tp_size=tp) == []


# --- normalize -------------------------------------------------------------------------------------------------------


def test_normalize_drops_omitted_flags_and_keeps_the_rest() -> None:
    out = rules.normalize({"a": None, "b": False, "c": True, "page-size": 16})
    assert out == {"c": True, "page-size": 16}


def test_normalize_topk1_forces_draft_tokens_to_steps_plus_one() -> None:
    assert rules.normalize(spec(speculative_num_steps=3, speculative_eagle_topk=1))["speculative-num-draft-tokens"] == 4
    # a draft-token value given at topk 1 is replaced, as SGLang does (with a warning)
    out = rules.normalize(spec(speculative_num_steps=2, speculative_eagle_topk="1", speculative_num_draft_tokens=9))
    assert out["speculative-num-draft-tokens"] == 3


def test_normalize_leaves_tree_drafting_and_non_speculative_points_alone() -> None:
    tree = spec(speculative_num_steps=3, speculative_eagle_topk=4, speculative_num_draft_tokens=8)
    assert rules.normalize(tree) == tree
    plain = {"speculative-num-steps": 3, "speculative-eagle-topk": 1}  # no algorithm: SGLang ignores them
    assert "speculative-num-draft-tokens" not in rules.normalize(plain)


def test_normalize_never_adds_max_running_requests() -> None:
    assert "max-running-requests" not in rules.normalize(spec())


def test_normalize_is_idempotent() -> None:
    once = rules.normalize(spec(speculative_num_steps=3, speculative_eagle_topk=1, x=None))
    assert rules.normalize(once) == once


# --- rule 1: the 48-request cap ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({}, None),
        ({"max-running-requests": 128}, 128),
        (spec(), 48),
        ({"speculative-algorithm": "NGRAM"}, 48),
        (spec(max_running_requests=256), 256),
        (spec(max_running_requests="96"), 96),
        ({"speculative-algorithm": None, "max-running-requests": None}, None),
    ],
)
def test_effective_max_running_requests(flags: dict[str, object], expected: int | None) -> None:
    assert rules.effective_max_running_requests(flags) == expected


# --- rule 2: steps / topk / draft tokens set together -------------------------------------------------------------------


def test_all_three_unset_is_valid() -> None:
    ok(spec())


def test_steps_and_topk_together_are_valid() -> None:
    ok(spec(speculative_num_steps=3, speculative_eagle_topk=1))


@pytest.mark.parametrize(
    "flags",
    [
        spec(speculative_num_steps=3),
        spec(speculative_eagle_topk=2),
        spec(speculative_num_draft_tokens=4),
        spec(speculative_num_steps=3, speculative_num_draft_tokens=4),
    ],
)
def test_partial_steps_topk_is_a_violation(flags: dict[str, object]) -> None:
    msg = only(flags)
    assert "together" in msg and "crashes at start" in msg


def test_non_positive_or_non_integer_shape_is_a_violation() -> None:
    assert "positive integer" in only(spec(speculative_num_steps=0, speculative_eagle_topk=1))
    assert "positive integer" in only(spec(speculative_num_steps="x", speculative_eagle_topk=1))


# --- rule 3: topk 1 -> draft tokens = steps + 1 ------------------------------------------------------------------------


def test_topk1_with_any_draft_tokens_is_valid_after_normalize() -> None:
    ok(spec(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=16))


# --- rule 4: topk > 1 with page size > 1 -------------------------------------------------------------------------------


TREE = {"speculative_num_steps": 3, "speculative_eagle_topk": 2, "speculative_num_draft_tokens": 6}


@pytest.mark.parametrize("backend", ["flashinfer", "fa3", "triton"])
def test_paged_tree_with_supported_backend_is_valid(backend: str) -> None:
    ok(spec(**TREE, page_size=16, attention_backend=backend))


def test_paged_tree_with_other_backend_is_a_violation() -> None:
    msg = only(spec(**TREE, page_size=16, attention_backend="flashmla"))
    assert "page-size 16" in msg and "flashinfer" in msg
    # the decode backend is the one that runs the tree
    assert only(spec(**TREE, page_size=16, attention_backend="fa3", decode_attention_backend="trtllm_mha"))


def test_tree_with_page_size_one_or_unset_backend_is_valid() -> None:
    ok(spec(**TREE, page_size=1, attention_backend="flashmla"))
    ok(spec(**TREE, page_size=64))  # backend unset: SGLang resolves it later; not judged here


# --- rule 5: draft tokens fit the tree ---------------------------------------------------------------------------------


def test_draft_tokens_at_the_tree_limit_are_valid() -> None:
    # steps 3, topk 2: draft - 1 <= 2 + 2 * 4 = 10
    ok(spec(speculative_num_steps=3, speculative_eagle_topk=2, speculative_num_draft_tokens=11))


def test_draft_tokens_above_the_tree_limit_are_a_violation() -> None:
    msg = only(spec(speculative_num_steps=3, speculative_eagle_topk=2, speculative_num_draft_tokens=12))
    assert "at most 11" in msg and "out of range" in msg
    msg = only(spec(speculative_num_steps=1, speculative_eagle_topk=2, speculative_num_draft_tokens=4))
    assert "at most 3" in msg


def test_simulated_accept_length_needs_steps_plus_one_draft_tokens() -> None:
    # a crash seen on the H200: steps 4, topk 2, 4 draft tokens, SGLANG_SIMULATE_ACC_LEN=3.0
    point = spec(speculative_num_steps=4, speculative_eagle_topk=2, speculative_num_draft_tokens=4)
    msg = only(point, {"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    assert "at least 5 draft tokens" in msg and "SGLANG_SIMULATE_ACC_LEN" in msg
    ok(point)  # real acceptance never exceeds the tree
    ok(point, {"SGLANG_SIMULATE_ACC_LEN": "-1"})  # SGLang's "off"
    ok(
        spec(speculative_num_steps=4, speculative_eagle_topk=2, speculative_num_draft_tokens=5),
        {"SGLANG_SIMULATE_ACC_LEN": "3.0"},
    )
    ok(spec(speculative_num_steps=3, speculative_eagle_topk=1), {"SGLANG_SIMULATE_ACC_LEN": "3.0"})  # chain: steps + 1


def test_tree_without_draft_tokens_is_a_violation() -> None:
    assert "needs --speculative-num-draft-tokens" in only(spec(speculative_num_steps=2, speculative_eagle_topk=4))


# --- rule 6: NGRAM / STANDALONE and DP attention; NEXTN ----------------------------------------------------------------


@pytest.mark.parametrize("dp", [{"enable-dp-attention": True}, {"attn-dp-size": 2}])
def test_ngram_with_dp_attention_is_a_violation(dp: dict[str, object]) -> None:
    assert "DP attention" in only({"speculative-algorithm": "NGRAM", **dp})


def test_standalone_with_dp_attention_is_a_violation() -> None:
    flags = {"speculative-algorithm": "STANDALONE", "speculative-draft-model-path": "/d", "enable-dp-attention": True}
    assert "DP attention" in only(flags)


def test_dp_attention_with_eagle_or_size_one_is_valid() -> None:
    ok(spec(enable_dp_attention=True))
    ok({"speculative-algorithm": "NGRAM", "attn-dp-size": 1, "enable-dp-attention": False})


def test_nextn_is_eagle_without_a_drafter_path() -> None:
    ok({"speculative-algorithm": "NEXTN"})
    out = rules.normalize({"speculative-algorithm": "nextn", "speculative-num-steps": 2, "speculative-eagle-topk": 1})
    assert out["speculative-num-draft-tokens"] == 3
    assert "together" in only({"speculative-algorithm": "NEXTN", "speculative-num-steps": 2})


def test_ngram_paged_needs_flashinfer() -> None:
    assert "flashinfer" in only({"speculative-algorithm": "NGRAM", "page-size": 16, "attention-backend": "triton"})
    ok({"speculative-algorithm": "NGRAM", "page-size": 16, "attention-backend": "flashinfer"})


# --- rule 7: drafter path ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["EAGLE", "EAGLE3", "STANDALONE", "eagle3"])
def test_drafter_needed(algo: str) -> None:
    assert "--speculative-draft-model-path" in only({"speculative-algorithm": algo})


@pytest.mark.parametrize("algo", ["DFLASH", "DSPARK", "dflash"])
def test_builtins_beyond_the_simulated_ones_are_valid(algo: str) -> None:
    """SGLang 0.5.17's --speculative-algorithm has no argparse choices: DFLASH and DSPARK are builtins it runs."""
    ok({"speculative-algorithm": algo, "speculative-draft-model-path": "/models/dflash"})
    assert rules.effective_max_running_requests({"speculative-algorithm": algo}) == 48


def test_dflash_needs_a_drafter_and_an_unknown_name_is_refused() -> None:
    assert "--speculative-draft-model-path" in only({"speculative-algorithm": "DFLASH"})
    ok({"speculative-algorithm": "DSPARK"})  # its drafter may be bundled in the target checkpoint
    assert "DFLASH" in only({"speculative-algorithm": "LOOKAHEAD"})


def test_no_algorithm_needs_nothing() -> None:
    ok({"speculative-algorithm": None, "speculative-num-steps": 3})
    ok({})


# --- rule 8: NCCL_ALGO ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["Tree", "tree", "^ring", "Tree,CollNet"])
def test_global_algo_without_ring_fails_at_tp_above_one(algo: str) -> None:
    msg = only({}, {"NCCL_ALGO": algo}, tp=2)
    assert "AllGather" in msg and "allreduce:tree" in msg


def test_global_tree_with_ll_names_the_protocol() -> None:
    msg = only({}, {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"}, tp=8)
    assert "NCCL_PROTO=LL" in msg


@pytest.mark.parametrize(
    "algo", ["allreduce:tree", "allreduce:ring", "allreduce:tree,ring", "Ring", "Ring,Tree", "^tree"]
)
def test_algo_that_leaves_ring_is_valid(algo: str) -> None:
    ok({}, {"NCCL_ALGO": algo, "NCCL_PROTO": "LL"}, tp=2)


def test_global_tree_is_harmless_at_tp_one() -> None:
    ok({}, {"NCCL_ALGO": "Tree"}, tp=1)


def test_per_collective_allgather_without_ring_is_a_violation() -> None:
    assert "allgather" in only({}, {"NCCL_ALGO": "allreduce:tree;allgather:tree"}, tp=2)


def test_unknown_nccl_algorithm_is_a_violation() -> None:
    assert "unknown algorithm" in only({}, {"NCCL_ALGO": "allreduce:rign"}, tp=2)


# --- rule 9: NVLink multicast -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["enable-nccl-nvls", "enable-symm-mem"])
def test_nvls_flags_are_a_violation_where_the_site_turns_multicast_off(flag: str, site_multicast_off: object) -> None:
    assert "NCCL_NVLS_ENABLE=1" in only({flag: True})
    ok({flag: False})


def test_nvls_env_must_stay_zero_where_the_site_turns_multicast_off(site_multicast_off: object) -> None:
    assert "NCCL_NVLS_ENABLE=1" in only({}, {"NCCL_NVLS_ENABLE": "1"})
    ok({}, {"NCCL_NVLS_ENABLE": "0"})


@pytest.mark.parametrize("flag", ["enable-nccl-nvls", "enable-symm-mem"])
def test_nvls_is_an_ordinary_setting_where_the_site_sets_nothing(flag: str, no_site: None) -> None:
    ok({flag: True})
    ok({}, {"NCCL_NVLS_ENABLE": "1"})


def test_several_problems_are_all_reported(site_multicast_off: object) -> None:
    found = rules.violations(
        {"speculative-algorithm": "EAGLE3", "enable-symm-mem": True}, {"NCCL_ALGO": "Tree"}, tp_size=4
    )
    assert len(found) == 3
