"""The model shapes ``autotune.models.dummy`` writes (``SHAPES``): each a real architecture's ``config.json``, with its
parameter count; ``resolved_config`` applies a layer override. Pure data, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from autotune.core.errors import AutotuneError

N_SPECIAL = 256  # the top ids of the vocab are special tokens
TRANSFORMERS_VERSION = "5.12.1"  # the release SGLang 0.5.17 pins; written into config.json like a real checkpoint


class ModelShapeError(AutotuneError):
    """An unknown shape name or an invalid override; the message lists the valid choices."""


@dataclass(frozen=True)
class ModelShape:
    """A named architecture: the Hugging Face ``config.json`` it writes, and what it is for."""

    name: str
    description: str
    config: Mapping[str, Any]
    drafter_for: str | None = None  # the target shape an EAGLE-3 drafter pairs with

    @property
    def architecture(self) -> str:
        return str(self.config["architectures"][0])


_LLAMA3_ROPE = {
    "factor": 32.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3",
}
_LLAMA_1B: dict[str, Any] = {  # Llama-3.2-1B
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": _LLAMA3_ROPE,
    "tie_word_embeddings": True,
    "hidden_act": "silu",
    "attention_bias": False,
    "mlp_bias": False,
    "torch_dtype": "bfloat16",
}
_LLAMA_8B: dict[str, Any] = {  # Llama-3.1-8B
    **_LLAMA_1B,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "head_dim": 128,
    "tie_word_embeddings": False,
    "rope_scaling": {**_LLAMA3_ROPE, "factor": 8.0},
}
# EAGLE-3 drafter: one Llama decoder layer over [embedding, fc(3 target hidden states)], full-vocab head (no d2t map).
_EAGLE3_LLAMA_1B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "vocab_size": 128256,
    "draft_vocab_size": 128256,
    "target_hidden_size": 2048,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "rope_scaling": _LLAMA3_ROPE,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "torch_dtype": "bfloat16",
}
_EAGLE3_LLAMA_8B: dict[str, Any] = {
    **_EAGLE3_LLAMA_1B,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "head_dim": 128,
    "target_hidden_size": 4096,
    "rope_scaling": {**_LLAMA3_ROPE, "factor": 8.0},
}
# DeepSeek-V3 architecture (MLA + routed/shared MoE, noaux_tc sigmoid router), bf16, no MTP layer.
_DSV3_SMALL: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "moe_intermediate_size": 1408,
    "num_hidden_layers": 4,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "n_routed_experts": 64,
    "n_shared_experts": 1,
    "num_experts_per_tok": 6,
    "n_group": 8,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "num_nextn_predict_layers": 0,
    "vocab_size": 129280,
    "max_position_embeddings": 16384,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "ep_size": 1,
    "torch_dtype": "bfloat16",
}
# DeepSeek-V3's widths with 8 layers (1 dense + 7 MoE; the real model has 3 dense + 58 MoE).
_DSV3_LARGE: dict[str, Any] = {
    **_DSV3_SMALL,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 8,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "num_experts_per_tok": 8,
    "max_position_embeddings": 163840,
}


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


SHAPES: Mapping[str, ModelShape] = MappingProxyType(
    {
        s.name: s
        for s in (
            ModelShape("llama-1b", "Llama-3.2-1B", _freeze(_LLAMA_1B)),
            ModelShape("llama-8b", "Llama-3.1-8B", _freeze(_LLAMA_8B)),
            ModelShape("eagle3-llama-1b", "EAGLE-3 drafter for llama-1b", _freeze(_EAGLE3_LLAMA_1B), "llama-1b"),
            ModelShape("eagle3-llama-8b", "EAGLE-3 drafter for llama-8b", _freeze(_EAGLE3_LLAMA_8B), "llama-8b"),
            ModelShape("dsv3-small", "DeepSeek-V3 MLA+MoE, 4 layers, 64 experts top-6", _freeze(_DSV3_SMALL)),
            ModelShape("dsv3-large", "DeepSeek-V3 widths, 8 layers, 256 experts top-8 (TP 8)", _freeze(_DSV3_LARGE)),
        )
    }
)


def get_shape(name: str) -> ModelShape:
    try:
        return SHAPES[name]
    except KeyError:
        raise ModelShapeError(
            f"unknown model shape {name!r}: choose one of {', '.join(SHAPES)} (`python -m autotune.models.dummy --list`)"
        ) from None


def resolved_config(shape: str, layers: int | None = None) -> dict[str, Any]:
    """The ``config.json`` content of ``shape`` (a fresh dict), with the depth overridden when ``layers`` is given."""
    cfg: dict[str, Any] = _thaw(get_shape(shape).config)
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
            raise ModelShapeError(f"layers must be an integer >= 1, got {layers!r}")
        dense = int(cfg.get("first_k_dense_replace", 0))
        if layers <= dense:
            raise ModelShapeError(
                f"{shape} has {dense} dense layer(s) before its MoE layers: use --layers {dense + 1} or more"
            )
        cfg["num_hidden_layers"] = layers
    vocab = int(cfg["vocab_size"])
    cfg.update(
        bos_token_id=vocab - N_SPECIAL, eos_token_id=vocab - N_SPECIAL + 1, transformers_version=TRANSFORMERS_VERSION
    )
    return cfg


# ------------------------------------------------------------------------------------------------ parameter counts


def _llama_attention(cfg: Mapping[str, Any], in_dim: int) -> int:
    h, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h // nh
    return in_dim * (nh + 2 * nkv) * hd + nh * hd * h


def _mla_attention(cfg: Mapping[str, Any]) -> int:
    h, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nope, rope, v, kvr = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"], cfg["v_head_dim"], cfg["kv_lora_rank"]
    qr = cfg.get("q_lora_rank")
    q = (h * qr + qr + qr * nh * (nope + rope)) if qr else h * nh * (nope + rope)
    return q + h * (kvr + rope) + kvr + kvr * nh * (nope + v) + nh * v * h


def param_count(config: Mapping[str, Any]) -> int:
    """Parameters of a Llama, EAGLE-3 Llama drafter or DeepSeek-V3 config (weights and norms; no buffers)."""
    arch = config["architectures"][0]
    h, vocab, n_layers = config["hidden_size"], config["vocab_size"], config["num_hidden_layers"]
    mlp = 3 * h * config["intermediate_size"]
    if arch == "LlamaForCausalLM":
        head = 0 if config.get("tie_word_embeddings") else vocab * h
        return vocab * h + head + n_layers * (_llama_attention(config, h) + mlp + 2 * h) + h
    if arch == "LlamaForCausalLMEagle3":
        fc = 3 * config["target_hidden_size"] * h
        layer = _llama_attention(config, 2 * h) + mlp + 3 * h  # attention reads [embedding, hidden]; 3 norms
        return vocab * h + fc + n_layers * layer + h + config.get("draft_vocab_size", vocab) * h
    if arch == "DeepseekV3ForCausalLM":
        experts = config["n_routed_experts"]
        expert = 3 * h * config["moe_intermediate_size"]
        moe = experts * expert + config["n_shared_experts"] * expert + experts * h + experts  # gate + bias
        dense = int(config["first_k_dense_replace"])
        body = n_layers * (_mla_attention(config) + 2 * h) + dense * mlp + (n_layers - dense) * moe
        head = 0 if config.get("tie_word_embeddings") else vocab * h
        return vocab * h + head + body + h
    raise ModelShapeError(f"no parameter count for architecture {arch!r}")
