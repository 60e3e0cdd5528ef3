"""Dummy-weight model directories that SGLang serves with ``--load-format dummy`` (random weights, real shapes).

    python -m autotune.models.dummy SHAPE OUTDIR [--layers N]
    python -m autotune.models.dummy --list

A directory holds ``config.json``, ``generation_config.json``, ``tokenizer.json``, ``tokenizer_config.json`` and
``special_tokens_map.json``; no weights (the server fills every parameter with random values). Speed and memory follow
the shape; the generated text is meaningless, and a drafter with random weights accepts no draft tokens: speculative
studies set ``SGLANG_SIMULATE_ACC_LEN`` as a stated property of their workload.

The tokenizer is a synthetic WordLevel vocabulary covering the model's whole vocab: ids ``0 .. V-257`` are the words
``t0``, ``t1``, ... (split on whitespace) and the top 256 ids are special tokens (``<|bos|>``, ``<|eos|>``, ``<unk>``,
``<|reserved_k|>``). A prompt of N ids is ``" ".join(f"t{i}" ...)`` and tokenizes back to exactly N tokens. The JSON is
written by hand in the ``tokenizers`` serialization format, so this module needs only the standard library.

Shapes (``--list`` prints them with their parameter counts):

- ``llama-1b`` / ``llama-8b``: Llama-3.2-1B / Llama-3.1-8B (1.24 B / 8.03 B parameters).
- ``eagle3-llama-1b`` / ``eagle3-llama-8b``: EAGLE-3 drafters (``LlamaForCausalLMEagle3``, one decoder layer) for them.
- ``dsv3-small``: DeepSeek-V3 architecture (MLA + MoE, noaux_tc router) shrunk to 4 layers, hidden 2048, 64 routed
  experts top-6 + 1 shared (2.35 B parameters).
- ``dsv3-large``: DeepSeek-V3's own widths (hidden 7168, 128 heads, 256 routed experts top-8 + 1 shared, MoE width 2048)
  with 8 layers instead of 61 (1 dense + 7 MoE): about 83.0 B parameters, 166 GB in bf16, about 21 GB per GPU at tensor
  parallel 8, so 8 H200s keep most of their memory for the KV cache. Per-layer compute and all-reduce sizes are those of
  the real model; for a TP-8 study of NCCL and MoE settings.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from autotune.errors import AutotuneError

N_SPECIAL = 256  # the top ids of the vocab are special tokens
SPECIAL_NAMED = ("<|bos|>", "<|eos|>", "<unk>")
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


# ----------------------------------------------------------------------------------------------------- tokenizer


def special_tokens() -> list[str]:
    return [*SPECIAL_NAMED, *(f"<|reserved_{k}|>" for k in range(N_SPECIAL - len(SPECIAL_NAMED)))]


def tokenizer_json(vocab_size: int) -> dict[str, Any]:
    """The ``tokenizer.json`` of the synthetic WordLevel vocabulary (the ``tokenizers`` 0.2x serialization)."""
    if vocab_size <= N_SPECIAL:
        raise ModelShapeError(f"vocab_size must be above {N_SPECIAL}, got {vocab_size}")
    n_words = vocab_size - N_SPECIAL
    vocab: dict[str, int] = {f"t{i}": i for i in range(n_words)}
    added = []
    for k, tok in enumerate(special_tokens()):
        vocab[tok] = n_words + k
        added.append(
            {
                "id": n_words + k,
                "content": tok,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,  # no decoder: tokens are joined with single spaces
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"},
    }


def tokenizer_config(max_len: int) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<|bos|>",
        "eos_token": "<|eos|>",
        "unk_token": "<unk>",
        "pad_token": "<|reserved_0|>",
        "model_max_length": max_len,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}",
    }


# ------------------------------------------------------------------------------------------------------- writing


def _write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=indent))
    os.replace(tmp, path)


def write_model(shape: str, outdir: Path, layers: int | None = None) -> Path:
    """Write the model directory of ``shape`` into ``outdir`` (created) and return ``outdir``."""
    cfg = resolved_config(shape, layers)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    vocab = int(cfg["vocab_size"])
    tok_cfg = tokenizer_config(int(cfg["max_position_embeddings"]))
    _write_json(outdir / "tokenizer.json", tokenizer_json(vocab), indent=None)
    _write_json(outdir / "tokenizer_config.json", tok_cfg)
    _write_json(
        outdir / "special_tokens_map.json",
        {k: tok_cfg[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token")},
    )
    _write_json(outdir / "config.json", cfg)
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"], "do_sample": False}
    _write_json(outdir / "generation_config.json", gen)
    return outdir


def format_shapes() -> str:
    lines = [f"{'shape':16} {'architecture':24} {'hidden':>6} {'layers':>6} {'vocab':>7} {'params':>9}  description"]
    for s in SHAPES.values():
        c = s.config
        n = param_count(c) / 1e9
        lines.append(
            f"{s.name:16} {s.architecture:24} {c['hidden_size']:>6} {c['num_hidden_layers']:>6} {c['vocab_size']:>7} "
            f"{n:>8.2f}B  {s.description}"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.models.dummy",
        description="Write a dummy-weight model directory (config + synthetic tokenizer) for --load-format dummy.",
    )
    p.add_argument("shape", nargs="?", help="one of: " + ", ".join(SHAPES))
    p.add_argument("outdir", nargs="?", type=Path, help="directory to write (created)")
    p.add_argument("--layers", type=int, help="override num_hidden_layers")
    p.add_argument("--list", action="store_true", help="list the shapes with their parameter counts")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.list:
        print(format_shapes())
        return 0
    if not args.shape or args.outdir is None:
        parser.print_usage(sys.stderr)
        print("error: give SHAPE and OUTDIR, or --list", file=sys.stderr)
        return 2
    try:
        out = write_model(args.shape, args.outdir, args.layers)
    except ModelShapeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg = json.loads((out / "config.json").read_text())
    print(
        f"wrote {args.shape} -> {out} ({param_count(cfg) / 1e9:.2f}B parameters, {cfg['num_hidden_layers']} layers, "
        f"vocab {cfg['vocab_size']}, bos {cfg['bos_token_id']}, eos {cfg['eos_token_id']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
