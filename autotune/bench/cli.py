"""``python -m autotune.bench.cli`` (also ``python -m autotune.bench.client``): benchmark a running server by hand."""

from __future__ import annotations

import argparse
import json
import sys

from autotune.bench.client import run_plan
from autotune.bench.types import BenchPlan, BenchResult, Dist, LevelSummary, WorkloadSpec
from autotune.core.errors import BenchError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.bench.client",
        description="Benchmark a running SGLang (or simulated) server at several concurrencies, on one warm server.",
    )
    p.add_argument("--url", default="http://127.0.0.1:30000", help="server base URL")
    p.add_argument("--concurrency", default="1,8,32", help="comma-separated load levels, e.g. 1,8,32")
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--range-ratio", type=float, default=0.0, help="lengths uniform in [len*(1-r), len]; 0 = fixed")
    p.add_argument("--dataset", help="JSONL file of prompts instead of synthetic input ids")
    p.add_argument("--vocab-size", type=int, default=32000, help="synthetic ids are drawn from [10, vocab-size)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--requests", type=int, default=None, help="requests per level (default max(8, 2 x concurrency))")
    p.add_argument("--min-duration", type=float, default=0.0, help="keep each level going this long (engine s)")
    p.add_argument("--warmup", type=int, default=2, help="warmup requests (not measured)")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, wall seconds")
    p.add_argument("--windows", default="2,5", help="MIN,MAX measurement windows per level (1,1: one window)")
    p.add_argument("--precision", type=float, default=0.05,
                   help="stop adding windows once the 95%% interval of output tok/s is within this fraction of the mean")
    p.add_argument("--no-flush", action="store_true", help="do not call /flush_cache before each level")
    p.add_argument("--repeats", type=int, default=1, help="run the whole plan N times and report the spread")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    return p


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _stat(d: Dist | None, name: str, digits: int = 1) -> str:
    return _fmt(None if d is None else getattr(d, name), digits)


def _interval(lv: LevelSummary) -> str:
    iv = lv.intervals.get("output_tok_per_s")
    if iv is None or iv.low is None or iv.high is None or iv.rel_half_width is None:
        return "-"
    return f"[{iv.low:.1f}, {iv.high:.1f}] ±{100 * iv.rel_half_width:.1f}% ({lv.stop_reason})"


def format_table(result: BenchResult) -> str:
    head = f"{'conc':>5} {'reqs':>5} {'fail':>4} {'dur_s':>7} {'out_tok/s':>10} {'req/s':>7} {'ttft_med':>9} "
    head += f"{'ttft_p99':>9} {'itl_med':>8} {'itl_p99':>8} {'tpot_med':>9} {'e2e_med':>9} {'accept':>6} {'win':>3} "
    head += "tok/s 95% interval"
    lines = [head]
    for lv in result.levels:
        lines.append(
            f"{lv.concurrency:>5} {lv.requests:>5} {lv.failed:>4} {lv.duration_s:>7.2f} {lv.output_tok_per_s:>10.1f} "
            f"{lv.request_per_s:>7.2f} {_stat(lv.ttft_ms, 'median'):>9} {_stat(lv.ttft_ms, 'p99'):>9} "
            f"{_stat(lv.itl_ms, 'median', 2):>8} {_stat(lv.itl_ms, 'p99', 2):>8} {_stat(lv.tpot_ms, 'median', 2):>9} "
            f"{_stat(lv.e2e_ms, 'median'):>9} {_fmt(lv.accept_length, 2):>6} {max(1, len(lv.windows)):>3} "
            f"{_interval(lv)}"
        )
    lines.append(f"time_scale={result.time_scale:g} server_accept_length={_fmt(result.server_accept_length, 2)}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def format_spread(results: list[BenchResult]) -> str:
    lines = ["output tok/s over repeats: level mean min max spread%(max-min)/mean"]
    for lv in results[0].levels:
        vals = [r.level(lv.concurrency).output_tok_per_s for r in results]
        mean = sum(vals) / len(vals)
        spread = 100.0 * (max(vals) - min(vals)) / mean if mean else 0.0
        lines.append(f"{lv.concurrency:>5} {mean:>10.1f} {min(vals):>10.1f} {max(vals):>10.1f} {spread:>6.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        concurrencies = tuple(int(c) for c in args.concurrency.split(",") if c.strip())
    except ValueError:
        print(f"--concurrency must be comma-separated integers, got {args.concurrency!r}", file=sys.stderr)
        return 2
    try:
        min_w, max_w = (int(x) for x in args.windows.split(","))
    except ValueError:
        print(f"--windows must be MIN,MAX (two integers), got {args.windows!r}", file=sys.stderr)
        return 2
    spec = WorkloadSpec(
        kind="jsonl" if args.dataset else "synthetic",
        input_len=args.input_len,
        output_len=args.output_len,
        range_ratio=args.range_ratio,
        path=args.dataset,
        seed=args.seed,
        vocab_size=args.vocab_size,
    )
    plan = BenchPlan(
        workload=spec,
        concurrencies=concurrencies,
        requests_per_level=args.requests,
        warmup_requests=args.warmup,
        min_duration_s=args.min_duration,
        request_timeout_s=args.timeout,
        min_windows=min_w,
        max_windows=max_w,
        target_rel_ci=args.precision,
        flush_cache=not args.no_flush,
    )
    results: list[BenchResult] = []
    try:
        for i in range(max(1, args.repeats)):
            results.append(run_plan(args.url, plan))
            if not args.json:
                print(f"== run {i + 1}/{max(1, args.repeats)} ==\n{format_table(results[-1])}", flush=True)
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
    elif len(results) > 1:
        print(format_spread(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
