"""GPU-memory prediction before a launch (autotune.policy.fit) and the pre-launch screen (autotune.policy.prescreen)."""

from __future__ import annotations

from pathlib import Path

from autotune.engines import engine_model
from autotune.engines.memory import from_model_dir
from autotune.policy import fit
from autotune.sim.adapter import profile_sizes
from autotune.sim.profile import load_profile
from autotune.space import load_study
from autotune.trial.records import FailureKind

ROOT = Path(__file__).resolve().parents[2]
H200 = 143771 * 1024 * 1024
SGLANG = engine_model("sglang")


def test_weights_larger_than_the_static_pool_are_predicted_oom() -> None:
    sizes = from_model_dir("/tmp/models/llama-1b", H200)  # no such directory here: the dummy shape's config
    bad = fit.predict(sizes, {"mem-fraction-static": 0.01}, tp_size=1, model=SGLANG)
    assert not bad.fits and bad.failure is FailureKind.OOM_AT_LAUNCH and "no KV cache" in bad.reason
    good = fit.predict(sizes, {"mem-fraction-static": 0.82}, tp_size=1, model=SGLANG)
    assert good.fits and good.kv_tokens is not None and good.kv_tokens > 1_000_000


def test_unknown_fraction_is_not_predicted() -> None:
    sizes = from_model_dir("/tmp/models/llama-1b", H200)
    assert fit.predict(sizes, {}, tp_size=1, model=SGLANG).fits


def test_capture_failure_from_graph_memory_on_a_sim_profile() -> None:
    sizes = profile_sizes(load_profile("kimi-k2.5-int4-8x-rtxpro6000"))
    flags = {
        "mem-fraction-static": 0.92,
        "max-running-requests": 256,
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/models/public-k2-eagle3",
        "speculative-num-steps": 5,
        "speculative-eagle-topk": 4,
        "speculative-num-draft-tokens": 8,
    }
    p = fit.predict(sizes, flags, tp_size=8, model=SGLANG)
    assert not p.fits and p.failure is FailureKind.GRAPH_CAPTURE_FAILED
    assert fit.predict(sizes, {**flags, "mem-fraction-static": 0.8}, tp_size=8, model=SGLANG).fits


def test_chunked_prefill_off_holds_activations_for_the_largest_prefill() -> None:
    """``--chunked-prefill-size -1`` turns chunking off: a prefill pass holds up to ``--max-prefill-tokens`` (16384),
    as the simulator and SGLang run it. It was read as a 1-token chunk, so a fraction whose activations and graphs do
    not fit was predicted to fit (and the repair could raise a point there)."""
    sizes = profile_sizes(load_profile("kimi-k2.5-int4-8x-rtxpro6000"))
    flags = {"mem-fraction-static": 0.9, "chunked-prefill-size": 16384}
    assert not fit.predict(sizes, flags, tp_size=8, model=SGLANG).fits
    off = fit.predict(sizes, {**flags, "chunked-prefill-size": -1}, tp_size=8, model=SGLANG)
    assert not off.fits and off.failure is FailureKind.GRAPH_CAPTURE_FAILED
    small = {**flags, "chunked-prefill-size": -1, "max-prefill-tokens": 4096}
    assert fit.predict(sizes, small, tp_size=8, model=SGLANG).fits


def test_check_says_when_a_prediction_was_wrong() -> None:
    fits = fit.Prediction(True, None, "fits")
    assert fit.check(fits, FailureKind.OOM_AT_LAUNCH, False) is not None
    assert fit.check(fits, None, True) is None
    no = fit.Prediction(False, FailureKind.OOM_AT_LAUNCH, "x")
    assert "but it launched" in (fit.check(no, None, True) or "")


def test_top_level_is_the_highest_load_the_objectives_and_constraints_read() -> None:
    from autotune.policy.prescreen import top_level

    assert top_level(load_study(ROOT / "search_spaces" / "speculative.yaml")) == 128


def test_the_baseline_is_measured_first_even_capped_and_other_capped_seeds_last() -> None:
    from dataclasses import replace

    from autotune.policy.defaults import default_rules
    from autotune.policy.prescreen import capped_seeds, deferred_seeds, uncapped_seeds
    from autotune.space import suggest
    from autotune.study.optuna_study import open_study
    from autotune.study.searcher import OptunaStudySearcher

    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    user = dict(spec.points_to_evaluate[0])
    plain = dict(spec.points_to_evaluate[1])
    lifted = {**user, "max_running_requests": 128}
    assert spec.baseline == user  # the first seed point is the user's current configuration
    assert uncapped_seeds(spec) == [lifted]
    assert capped_seeds(spec) == [user]
    assert deferred_seeds(spec, None) == []  # the capped baseline is never kept for last
    study = open_study(spec, None)
    asked = [suggest(spec, study.ask()) for _ in range(3)]
    assert asked == [user, lifted, plain]  # the baseline first, its lifted twin next
    assert uncapped_seeds(load_study(ROOT / "search_spaces" / "nccl.yaml")) == []
    assert capped_seeds(load_study(ROOT / "search_spaces" / "nccl.yaml")) == []

    # with another baseline, the capped seed is launched when one launch of the budget remains, or when the stopping
    # rule ends the search; a stop before the queued seeds ran launches none of them (only the one kept for last)
    other = replace(spec, baseline_point=plain)
    assert deferred_seeds(other, None) == [user]
    for budget, stop_after in ((4, None), (40, 3), (40, 1)):
        study = open_study(other, None)
        s = OptunaStudySearcher(
            other,
            study,
            budget=budget,
            on_record=lambda r, log: None,
            make_missing_record=_failed_record(other),
            rules=default_rules(other),
        )
        launched = []
        for i in range(budget):
            if stop_after is not None and i == stop_after:
                s.finish("no improvement")
            cfg = s.suggest(f"t{i}")
            if not isinstance(cfg, dict):
                break
            launched.append(cfg["params"])
            s.on_trial_complete(f"t{i}", None)
        assert launched[0] == plain, launched
        assert launched[-1] == user and user not in launched[:-1], (budget, launched)
        assert len(launched) == (budget if stop_after is None else stop_after + 1)
        assert s.suggest("after") == "FINISHED"  # Searcher.FINISHED


def _failed_record(spec):  # type: ignore[no-untyped-def]
    from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord

    def missing(number: int, tid: str, params: dict, reason: str) -> TrialRecord:
        return TrialRecord(
            study=spec.name,
            trial_id=tid,
            number=number,
            params=params,
            flags={},
            env={},
            argv=[],
            outcome=TrialOutcome.FAILED,
            failure=FailureKind.UNKNOWN,
            message=reason,
        )

    return missing


def test_pipeline_parallel_splits_the_weights_and_the_kv_layers_over_its_stages() -> None:
    """With ``--pp-size`` each GPU holds its stage's layers (SGLang's ``get_pp_indices``: the last ``L % pp`` stages
    take one layer more), their weights and their KV cache. A 140 GiB model at TP 2 x PP 2 on 80 GiB GPUs was
    predicted out of memory at launch (70 GiB of weights a GPU) and the repair and the seed screen set it aside."""
    from autotune.engines.memory import GIB, Sizes

    sizes = Sizes(gpu_mem_bytes=80 * GIB, weight_bytes=140 * GIB, kv_bytes_per_token=320 * 1024, num_layers=81)
    flags = {"mem-fraction-static": 0.85}
    tp_only = fit.predict(sizes, flags, tp_size=2, model=SGLANG)
    assert not tp_only.fits and tp_only.failure is FailureKind.OOM_AT_LAUNCH
    staged = fit.predict(sizes, {**flags, "pp-size": 2}, tp_size=2, model=SGLANG)
    share = 41 / 81  # the fullest stage
    per_token = 320 * 1024 / 2 * share
    kv = 80 * GIB * 0.85 - 140 * GIB / 2 * share - sizes.preload_bytes
    assert staged.fits and staged.kv_tokens == int(kv / per_token)
    assert fit.predict(sizes, {**flags, "pp-size": "1"}, tp_size=2, model=SGLANG) == tp_only
