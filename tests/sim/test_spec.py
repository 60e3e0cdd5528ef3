"""Speculative rules as SGLang applies them, and acceptance from the drafter's quality."""

from __future__ import annotations

import random

import pytest

from autotune.sim.config import ArgsFailure
from autotune.sim.offline import build

KIMI = "kimi-k2.5-int4-8x-rtxpro6000"


def _spec(*flags: str, profile: str = KIMI, env: dict[str, str] | None = None):
    cfg = build(["--model-path", "m", "--tp", "8" if profile == KIMI else "1", *flags], env, profile=profile)
    return cfg


def _eagle(drafter: str, *extra: str) -> list[str]:
    return ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", drafter, *extra]


STEPS_314 = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]


def test_accept_length_follows_drafter_quality() -> None:
    public = _spec(*_eagle("public-k2-eagle3", *STEPS_314)).spec
    custom = _spec(*_eagle("custom-k25-eagle3", *STEPS_314)).spec
    assert public is not None and custom is not None
    assert public.expected_accept_length == pytest.approx(1.68, abs=0.02)
    assert custom.expected_accept_length == 1.0
    rng = random.Random(0)
    assert {custom.sample_accepted(rng) for _ in range(200)} == {1}


def test_eagle_with_an_eagle3_drafter_accepts_nothing() -> None:
    flags = ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "public-k2-eagle3", *STEPS_314]
    spec = _spec(*flags).spec
    assert spec is not None and spec.expected_accept_length == 1.0


def test_nextn_becomes_eagle() -> None:
    flags = ["--speculative-algorithm", "NEXTN", "--speculative-draft-model-path", "public-k2-eagle3", *STEPS_314]
    spec = _spec(*flags).spec
    assert spec is not None and spec.algorithm == "EAGLE"


def test_topk_one_forces_draft_tokens_to_steps_plus_one() -> None:
    cfg = _spec(
        *_eagle(
            "public-k2-eagle3",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            "8",
        )
    )
    assert cfg.spec is not None and cfg.spec.num_draft_tokens == 4
    assert any("adjusted" in w for w in cfg.warnings)


def test_unset_triple_uses_model_defaults() -> None:
    spec = _spec(*_eagle("public-k2-eagle3")).spec
    assert spec is not None and (spec.num_steps, spec.topk, spec.num_draft_tokens) == (3, 1, 4)
    llama = _spec(*_eagle("any"), profile="h200-llama-1b").spec
    assert llama is not None and (llama.num_steps, llama.topk, llama.num_draft_tokens) == (5, 4, 8)


def test_steps_without_topk_fails_at_start() -> None:
    with pytest.raises(ArgsFailure, match="must be set together"):
        _spec(*_eagle("public-k2-eagle3", "--speculative-num-steps", "3"))


def test_tree_too_small_for_draft_tokens_fails() -> None:
    flags = ["--speculative-num-steps", "2", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "8"]
    with pytest.raises(ArgsFailure, match="selected index k out of range"):
        _spec(*_eagle("public-k2-eagle3", *flags))


def test_topk_above_one_with_paged_kv_needs_a_tree_backend() -> None:
    flags = ["--speculative-num-steps", "3", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"]
    with pytest.raises(ArgsFailure, match="page_size > 1"):
        _spec(*_eagle("public-k2-eagle3", *flags), "--page-size", "16", "--attention-backend", "flashmla")
    assert _spec(*_eagle("public-k2-eagle3", *flags), "--page-size", "16", "--attention-backend", "triton").spec


def test_wider_tree_accepts_more() -> None:
    chain = _spec(*_eagle("public-k2-eagle3", *STEPS_314)).spec
    tree = _spec(
        *_eagle(
            "public-k2-eagle3",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "4",
            "--speculative-num-draft-tokens",
            "8",
        )
    ).spec
    assert chain is not None and tree is not None
    assert tree.expected_accept_length > chain.expected_accept_length


def test_ngram_defaults() -> None:
    spec = _spec("--speculative-algorithm", "NGRAM").spec
    assert spec is not None and (spec.topk, spec.num_draft_tokens, spec.num_steps) == (10, 12, 1)
    assert _spec("--speculative-algorithm", "NGRAM").max_running_requests == 48


def test_simulate_acc_len_env_sets_accept_length() -> None:
    spec = _spec(*_eagle("x"), profile="h200-llama-1b", env={"SGLANG_SIMULATE_ACC_LEN": "3.0"}).spec
    assert spec is not None and spec.expected_accept_length == 3.0
    rng = random.Random(1)
    assert {spec.sample_accepted(rng) for _ in range(50)} == {3}
    dummy = _spec(*_eagle("x"), profile="h200-llama-1b").spec
    assert dummy is not None and dummy.expected_accept_length == 1.0


def test_unknown_drafter_path_fails_like_a_missing_model() -> None:
    with pytest.raises(ArgsFailure, match="Incorrect path_or_model_id"):
        _spec(*_eagle("/models/nope", *STEPS_314))


@pytest.mark.parametrize("draft_format", [None, "dummy", "auto"])
def test_a_drafter_with_dummy_target_weights_launches(draft_format: str | None) -> None:
    # the H200 study's shape: --load-format dummy and an EAGLE-3 drafter path (the simulator must accept both)
    extra = ["--speculative-draft-load-format", draft_format] if draft_format else []
    cfg = _spec(
        "--load-format",
        "dummy",
        *_eagle("/tmp/models/eagle3-llama-1b", *STEPS_314),
        *extra,
        profile="h200-llama-1b",
        env={"SGLANG_SIMULATE_ACC_LEN": "3.0"},
    )
    assert cfg.launch.draft_load_s == (0.2 if draft_format != "auto" else cfg.spec.drafter.load_s)
