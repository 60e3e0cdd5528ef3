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

Shapes (``autotune/models/shapes.py``; ``--list`` prints them with their parameter counts):

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.models.shapes import N_SPECIAL, SHAPES, ModelShapeError, param_count, resolved_config

SPECIAL_NAMED = ("<|bos|>", "<|eos|>", "<unk>")


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
