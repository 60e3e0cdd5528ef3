"""SGLang's own client for ``python -m autotune.verify --bench-serving``: ``python -m sglang.bench_serving`` per level.

Same workload as the study: random token ids (``--dataset-name random-ids --tokenize-prompt``) with the study's input
and output lengths and range (bench_serving's range ratio is the lower bound, autotune's is the spread: 1 - r), the
request count the caller gives per level (verify: what the study's trial completed there; default one window's
worth), ``--max-concurrency`` = the level, the workload's seed; results read from its
``--output-file`` JSONL.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autotune.bench.client import requests_for_level
from autotune.bench.types import BenchPlan
from autotune.core.errors import BenchError

MODULE = "sglang.bench_serving"
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class BenchServingLevel:
    concurrency: int
    num_prompts: int
    completed: int
    output_tok_per_s: float
    ttft_ms_p99: float | None
    ttft_ms_median: float | None
    tpot_ms_median: float | None
    duration_s: float


def bench_serving_available() -> bool:
    return importlib.util.find_spec("sglang") is not None


def bench_serving_argv(
    plan: BenchPlan, base_url: str, model: str, concurrency: int, output: Path, num_prompts: int | None = None
) -> list[str]:
    w = plan.workload
    prompts = num_prompts if num_prompts is not None else requests_for_level(plan, concurrency)
    return [
        sys.executable, "-m", MODULE, "--backend", "sglang", "--base-url", base_url,
        "--dataset-name", "random-ids", "--tokenizer", model, "--model", model,
        "--random-input-len", str(w.input_len), "--random-output-len", str(w.output_len),
        "--random-range-ratio", f"{1.0 - w.range_ratio:g}", "--tokenize-prompt",
        "--num-prompts", str(prompts),
        "--max-concurrency", str(concurrency), "--request-rate", "inf",
        "--output-file", str(output), "--seed", str(w.seed),
        "--warmup-requests", str(max(1, plan.warmup_requests)), "--ready-check-timeout-sec", "0", "--disable-tqdm",
    ]  # fmt: skip


def parse_result(text: str, concurrency: int, num_prompts: int) -> BenchServingLevel:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise BenchError("bench_serving wrote no result line (did every request fail? see its log)")
    rec = json.loads(lines[-1])

    def opt(key: str) -> float | None:
        value = rec.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    if "output_throughput" not in rec:
        raise BenchError("bench_serving's result has no output_throughput: is this SGLang 0.5.x's bench_serving?")
    return BenchServingLevel(
        concurrency=concurrency,
        num_prompts=num_prompts,
        completed=int(rec.get("completed", 0)),
        output_tok_per_s=float(rec["output_throughput"]),
        ttft_ms_p99=opt("p99_ttft_ms"),
        ttft_ms_median=opt("median_ttft_ms"),
        tpot_ms_median=opt("median_tpot_ms"),
        duration_s=float(rec.get("duration", 0.0)),
    )


def run_bench_serving(
    plan: BenchPlan,
    base_url: str,
    model: str,
    out_dir: Path,
    prompts: Mapping[int, int] | None = None,
    on_level: Callable[[BenchServingLevel], object] | None = None,
) -> list[BenchServingLevel]:
    """One bench_serving run per load level of ``plan`` (``prompts``: requests per level, default one window's
    worth; ``on_level``: called with each level's result as it finishes); raises BenchError naming the log of a run
    that failed."""
    results = []
    for c in plan.concurrencies:
        n = (prompts or {}).get(c) or requests_for_level(plan, c)
        output = out_dir / f"bench_serving-c{c}.jsonl"
        output.unlink(missing_ok=True)
        log = out_dir / f"bench_serving-c{c}.log"
        argv = bench_serving_argv(plan, base_url, model, c, output, n)
        env = {**os.environ, **OFFLINE_ENV, "TOKENIZERS_PARALLELISM": "false"}
        with log.open("w") as fh:
            fh.write(shlex.join(argv) + "\n")
            fh.flush()
            try:
                proc = subprocess.run(
                    argv, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=plan.level_timeout_s, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise BenchError(
                    f"bench_serving at concurrency {c} did not finish in {plan.level_timeout_s:g} s; see {log}"
                ) from exc
        if proc.returncode != 0 or not output.exists():
            raise BenchError(f"bench_serving at concurrency {c} failed (exit {proc.returncode}); see {log}")
        results.append(parse_result(output.read_text(), c, n))
        if on_level is not None:
            on_level(results[-1])
    return results
