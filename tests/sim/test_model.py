"""The performance model moves in the documented direction for each searched knob (pure, no server)."""

from __future__ import annotations

import pytest

from autotune.sim.offline import build, run_closed_loop

KIMI = "kimi-k2.5-int4-8x-rtxpro6000"
H1 = "h200-llama-1b"
H2 = "h200x2-llama-8b"
KIMI_EAGLE = [
    "--tp",
    "8",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "public-k2-eagle3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
]


def _cfg(profile: str, *flags: str, env: dict[str, str] | None = None):
    return build(["--model-path", "m", *flags], env, profile=profile)


def test_max_running_requests_above_48_raises_speculative_peak() -> None:
    capped = _cfg(KIMI, *KIMI_EAGLE)
    lifted = _cfg(KIMI, *KIMI_EAGLE, "--max-running-requests", "128")
    assert capped.max_running_requests == 48
    assert lifted.max_running_requests == 128
    a = run_closed_loop(capped, 128, 128, 128, 256)
    b = run_closed_loop(lifted, 128, 128, 128, 256)
    assert b.output_tok_per_s > 1.3 * a.output_tok_per_s


def test_unset_limit_without_speculation_comes_from_kv_capacity() -> None:
    cfg = _cfg(KIMI, "--tp", "8")
    assert cfg.max_running_requests > 48


def test_nccl_protocol_and_algorithm_change_allreduce_time() -> None:
    nbytes = 128 * 7168 * 2
    times = {}
    for env in (
        {},
        {"NCCL_PROTO": "LL"},
        {"NCCL_PROTO": "Simple"},
        {"NCCL_PROTO": "LL128"},
        {"NCCL_ALGO": "allreduce:tree"},
    ):
        model = _cfg(KIMI, "--tp", "8", env=env).perf_model()
        times[str(env)] = model.allreduce_us(nbytes)
    default, ll, simple = times["{}"], times[str({"NCCL_PROTO": "LL"})], times[str({"NCCL_PROTO": "Simple"})]
    assert ll > simple  # LL: low bandwidth at 1.8 MB
    assert default == pytest.approx(min(ll, simple))  # NCCL picks the cheapest enabled (LL128 is off on PCIe)
    assert times[str({"NCCL_PROTO": "LL128"})] != pytest.approx(simple)  # forcing LL128 on PCIe enables it
    assert times[str({"NCCL_ALGO": "allreduce:tree"})] > simple  # a chain "tree" on one PCIe node is slow
    small = _cfg(KIMI, "--tp", "8", env={"NCCL_PROTO": "LL"}).perf_model().allreduce_us(14336)
    assert small < _cfg(KIMI, "--tp", "8", env={"NCCL_PROTO": "Simple"}).perf_model().allreduce_us(14336)


def test_fewer_channels_and_small_buffers_slow_large_allreduce() -> None:
    nbytes = 64 * 2**20
    base = _cfg(KIMI, "--tp", "8").perf_model().allreduce_us(nbytes)
    one_channel = _cfg(KIMI, "--tp", "8", env={"NCCL_MAX_NCHANNELS": "1"}).perf_model().allreduce_us(nbytes)
    small_buf = _cfg(KIMI, "--tp", "8", env={"NCCL_BUFFSIZE": str(2**20)}).perf_model().allreduce_us(nbytes)
    assert one_channel > base
    assert small_buf > base


def test_custom_allreduce_beats_nccl_at_small_messages() -> None:
    custom = _cfg(H2, "--tp", "2").perf_model()
    nccl = _cfg(H2, "--tp", "2", "--disable-custom-all-reduce").perf_model()
    assert custom.knobs.custom_ar and not nccl.knobs.custom_ar
    assert custom.allreduce_us(8192) < nccl.allreduce_us(8192)
    assert custom.decode_step(1, 256).seconds < nccl.decode_step(1, 256).seconds


def test_custom_allreduce_unavailable_on_eight_pcie_gpus() -> None:
    cfg = _cfg(KIMI, "--tp", "8")
    assert not cfg.knobs.custom_ar
    assert any("Custom allreduce is disabled" in w for w in cfg.warnings)


def test_batches_above_the_captured_graph_size_are_slower() -> None:
    small = _cfg(H1, "--cuda-graph-max-bs", "16").perf_model()
    big = _cfg(H1, "--cuda-graph-max-bs-decode", "64").perf_model()
    assert small.decode_step(32, 32 * 200).seconds > 2 * big.decode_step(32, 32 * 200).seconds
    assert small.decode_step(16, 16 * 200).seconds == pytest.approx(big.decode_step(16, 16 * 200).seconds)
    off = _cfg(H1, "--disable-cuda-graph").perf_model()
    assert off.decode_step(8, 8 * 200).seconds > big.decode_step(8, 8 * 200).seconds


def test_speculative_mode_never_captures_graphs_beyond_the_running_limit() -> None:
    cfg = _cfg(
        H1, "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--cuda-graph-max-bs", "256"
    )
    assert cfg.knobs.graph_max_bs == 48 and max(cfg.graph_bs) == 48


def test_expert_touch_fraction_follows_the_formula() -> None:
    model = _cfg(KIMI, "--tp", "8").perf_model()
    for n in (1, 8, 128):
        assert model.expert_touch_fraction(n) == pytest.approx(1 - (1 - 8 / 384) ** n)
    assert model.forward(128, 128, 0, graph=True).seconds > model.forward(1, 1, 0, graph=True).seconds


def test_mem_fraction_too_low_fails_with_sglang_message() -> None:
    cfg = _cfg(KIMI, "--tp", "8", "--mem-fraction-static", "0.7")
    assert cfg.failure is not None and cfg.failure.phase == "kv"
    assert "Loaded weights leave no GPU memory for the KV cache" in cfg.failure.lines[-1]


def test_mem_fraction_too_high_fails_graph_capture() -> None:
    cfg = _cfg(H1, "--mem-fraction-static", "0.985")
    assert cfg.failure is not None and cfg.failure.phase == "capture"
    assert "Capture cuda graph failed" in cfg.failure.lines[0]
    assert any("--mem-fraction-static to a smaller value" in line for line in cfg.failure.lines)
    assert _cfg(H1, "--mem-fraction-static", "0.9").failure is None


def test_kv_capacity_grows_with_mem_fraction_and_fp8() -> None:
    a = _cfg(H1, "--mem-fraction-static", "0.8")
    b = _cfg(H1, "--mem-fraction-static", "0.85")
    c = _cfg(H1, "--mem-fraction-static", "0.8", "--kv-cache-dtype", "fp8_e4m3")
    assert a.kv_tokens < b.kv_tokens
    assert c.kv_tokens == pytest.approx(2 * a.kv_tokens, rel=0.01)
    assert a.kv_tokens == pytest.approx(3_569_454, rel=0.02)  # device README, mem fraction 0.80


def test_global_nccl_tree_fails_at_capture_but_per_collective_form_works() -> None:
    bad = _cfg(H2, "--tp", "2", "--disable-custom-all-reduce", env={"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"})
    assert bad.failure is not None and bad.failure.phase == "capture"
    assert "no algorithm/protocol available for function AllGather" in bad.failure.lines[0]
    assert "Capture cuda graph failed: NCCL error: invalid usage" in bad.failure.lines[2]
    assert _cfg(H2, "--tp", "2", env={"NCCL_ALGO": "tree"}).failure is not None
    assert _cfg(H2, "--tp", "2", env={"NCCL_ALGO": "allreduce:tree"}).failure is None
    assert _cfg(H1, env={"NCCL_ALGO": "Tree"}).failure is None  # TP 1: no collectives


def test_chunked_prefill_costs_more_passes() -> None:
    model = _cfg(H1).perf_model()
    whole = model.prefill(8192, 1, 0)
    chunks = sum(model.prefill(1024, 1, i * 1024) for i in range(8))
    assert chunks > whole


def test_launch_time_counts_weights_and_graphs() -> None:
    real = _cfg(KIMI, "--tp", "8")
    dummy = _cfg(KIMI, "--tp", "8", "--load-format", "dummy")
    assert real.launch.weight_load_s == pytest.approx(313.0)
    assert dummy.launch.total_s < real.launch.total_s - 250
    no_graph = _cfg(KIMI, "--tp", "8", "--disable-cuda-graph")
    assert no_graph.launch.graph_capture_s == 0.0 < real.launch.graph_capture_s


def test_closed_loop_is_deterministic_under_a_seed() -> None:
    cfg = _cfg(KIMI, *KIMI_EAGLE)
    a = run_closed_loop(cfg, 8, 16, 64, 64, seed=3, noise=0.05)
    b = run_closed_loop(cfg, 8, 16, 64, 64, seed=3, noise=0.05)
    c = run_closed_loop(cfg, 8, 16, 64, 64, seed=4, noise=0.05)
    assert a == b
    assert a != c


def test_small_kv_cache_queues_and_retracts() -> None:
    roomy = run_closed_loop(_cfg(H1), 32, 64, 128, 256)
    tight = run_closed_loop(_cfg(H1, "--max-total-tokens", "3000"), 32, 64, 128, 256)
    assert roomy.retractions == 0 and tight.retractions > 0
    assert tight.requests == 64  # every request still completes
    assert tight.output_tok_per_s < roomy.output_tok_per_s
    assert tight.mean_ttft_s > roomy.mean_ttft_s


def test_pipeline_parallel_and_dp_attention_are_counted_in_gpus_and_refused_as_not_modelled() -> None:
    """SGLang runs --tp 8 --dp 8 --enable-dp-attention on 8 GPUs and --tp 4 --pp-size 2 on 8 (weights split 8 ways);
    the simulator models neither, so it says so instead of failing for a wrong reason or ignoring the flag."""
    from autotune.sim.config import ArgsFailure

    for profile, flags in (
        (KIMI, ("--tp", "8", "--dp", "8", "--enable-dp-attention")),
        (KIMI, ("--tp", "8", "--attn-dp-size", "2")),
        (KIMI, ("--tp", "4", "--pp-size", "2")),
    ):
        with pytest.raises(ArgsFailure, match="does not model"):
            _cfg(profile, *flags)
    with pytest.raises(ArgsFailure, match="invalid device ordinal"):  # 2 GPUs on the one-GPU profile
        _cfg(H1, "--pp-size", "2")
    assert _cfg(KIMI, "--tp", "8", "--enable-dp-attention").failure is None  # dp 1: DP attention changes nothing
