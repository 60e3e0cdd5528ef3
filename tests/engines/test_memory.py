"""What a model takes in GPU memory, read from its config.json (autotune.engines.memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.engines import memory
from autotune.models.dummy import resolved_config

H200 = 143771 * 1024 * 1024


def test_llama_1b_sizes_match_what_sglang_loaded_on_the_h200() -> None:
    cfg = resolved_config("llama-1b")
    # SGLang's log on the H200: "Load weight end ... mem usage=2.35 GB" (GiB); the drafter 1.23 GB
    assert memory.model_bytes(cfg) / memory.GIB == pytest.approx(2.31, abs=0.05)
    # the drafter's parameter count comes 8% under what SGLang reported (1.13 vs 1.23 GiB): buffers it allocates too
    assert memory.model_bytes(resolved_config("eagle3-llama-1b")) / memory.GIB == pytest.approx(1.23, rel=0.1)
    kv, replicated = memory.kv_bytes_per_token(cfg)
    assert kv == 2 * 8 * 64 * 16 * 2 and not replicated


def test_model_dir_config_json_is_read(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(resolved_config("llama-8b")))
    sizes = memory.from_model_dir(tmp_path, H200)
    assert sizes.weight_bytes / 1e9 == pytest.approx(16.06, abs=0.1)
    with pytest.raises(memory.FitError, match="not a known dummy shape"):
        memory.from_model_dir(tmp_path / "nothing-here", H200)


def test_a_quantized_checkpoint_is_sized_at_its_stored_width(tmp_path: Path) -> None:
    """DeepSeek-V3's FP8 release says torch_dtype bfloat16 beside quantization_config fp8: sized at 2 bytes a weight
    it took 1.34 TB, so every point at TP 8 on the H200 was predicted out of memory at launch (156 GiB a GPU)."""
    from autotune.engines.sglang_model import SGLANG
    from autotune.policy import fit

    cfg = resolved_config("dsv3-large")
    cfg.update(num_hidden_layers=61, first_k_dense_replace=3)
    bf16 = memory.model_bytes(cfg)
    cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    sizes = memory.from_model_dir(tmp_path, H200)
    assert sizes.weight_bytes == pytest.approx(bf16 / 2) and sizes.weight_bytes / 1e9 == pytest.approx(671, abs=2)
    assert fit.predict(sizes, {"mem-fraction-static": 0.85}, tp_size=8, model=SGLANG).fits
    awq = {**cfg, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    assert memory.model_bytes(awq) == pytest.approx(bf16 / 4)


def test_a_rank_holds_at_least_one_kv_head_under_tp_above_the_kv_heads(tmp_path: Path) -> None:
    """SGLang gives each TP rank ``max(1, kv_heads // tp)`` KV heads (``ModelConfig.get_num_kv_heads``): a model with
    4 KV heads at TP 8 holds one whole head a rank. Split evenly, a token took half a head's bytes, and the prediction
    promised twice the KV cache the launch allocates. MLA's latent cache stays whole on every rank."""
    from autotune.engines.sglang_model import SGLANG

    cfg = {**resolved_config("llama-8b"), "num_key_value_heads": 4}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    sizes = memory.from_model_dir(tmp_path, H200)
    head = 1 * 128 * 32 * 2 * 2  # one KV head of 128, 32 layers, K and V, bf16
    assert SGLANG.kv_bytes_per_token(sizes, {}, tp_size=8) == head
    assert SGLANG.kv_bytes_per_token(sizes, {}, tp_size=2) == 2 * head
    mla = tmp_path / "mla"
    mla.mkdir()
    (mla / "config.json").write_text(json.dumps(resolved_config("dsv3-large")))
    latent = memory.from_model_dir(mla, H200)
    assert SGLANG.kv_bytes_per_token(latent, {}, tp_size=8) == latent.kv_bytes_per_token


@pytest.mark.parametrize(
    ("quantization", "width"),
    [
        # Kimi-K2's INT4 release (a DeepSeek-V3 architecture) and an FP8 one of llm-compressor's
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 4}}}}, 0.25),
        ({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {"num_bits": 8}}}}, 0.5),
        ({"quant_method": "mxfp4"}, 4.25 / 16),  # gpt-oss: 4 bits and an 8-bit scale per 32 values
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, 0.5),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, 4.5 / 16),
    ],
)
def test_other_quantization_formats_are_sized_at_their_stored_width(
    tmp_path: Path, quantization: dict[str, object], width: float
) -> None:
    """Checkpoints of these formats also say torch_dtype bfloat16: sized at 2 bytes a weight, DeepSeek-V3's shape in INT4
    took 168 GB a GPU at TP 8, so every point on the H200 was predicted out of memory at launch."""
    cfg = resolved_config("dsv3-large")
    cfg.update(num_hidden_layers=61, first_k_dense_replace=3)
    bf16 = memory.model_bytes(cfg)
    assert memory.model_bytes({**cfg, "quantization_config": quantization}) == pytest.approx(bf16 * width)
