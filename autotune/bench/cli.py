"""``python -m autotune.bench.cli`` (also ``python -m autotune.bench.client``): benchmark a running server by hand."""

from __future__ import annotations

import argparse
import json
import re
import sys

from autotune.bench.client import check_plan, run_plan
from autotune.bench.load import Load
from autotune.bench.types import SLO, BenchPlan, BenchResult, Dist, LevelSummary, WorkloadSpec
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
    p.add_argument("--dataset", help="a file for the workload kind (JSONL prompts, ShareGPT JSON, a Mooncake trace)")
    p.add_argument(
        "--kind",
        default=None,
        help="workload kind (autotune/bench/workloads): random-ids, random, jsonl, sharegpt, multi-turn, "
        "shared-prefix, trace (default: jsonl with --dataset, else random-ids)",
    )
    p.add_argument("--rate", default="", help="comma-separated request rates (req/s) measured after the concurrencies")
    p.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of rate arrivals (1 = Poisson)")
    p.add_argument("--context-len", type=int, default=None, help="drop dataset requests longer than this")
    p.add_argument("--slo", default="", help="per-request SLOs for goodput, e.g. ttft_ms=2000,tpot_ms=100")
    p.add_argument("--vocab-size", type=int, default=32000, help="synthetic ids are drawn from [10, vocab-size)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--requests", type=int, default=None, help="requests per level (default max(8, 2 x concurrency))")
    p.add_argument("--min-duration", type=float, default=0.0, help="keep each level going this long (engine s)")
    p.add_argument("--warmup", type=int, default=2, help="warmup requests (not measured)")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, wall seconds")
    p.add_argument("--windows", default="2,5", help="MIN,MAX measurement windows per level (1,1: one window)")
    p.add_argument(
        "--precision",
        type=float,
        default=0.05,
        help="stop adding windows once the 95%% interval of output tok/s is within this fraction of the mean",
    )
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
    head = f"{'level':>8} {'reqs':>5} {'fail':>4} {'dur_s':>7} {'out_tok/s':>10} {'req/s':>7} {'ttft_med':>9} "
    head += f"{'ttft_p99':>9} {'itl_med':>8} {'itl_p99':>8} {'tpot_med':>9} {'e2e_med':>9} {'accept':>6} {'win':>3} "
    head += "tok/s 95% interval"
    lines = [head]
    for lv in result.levels:
        lines.append(
            f"{lv.key!s:>8} {lv.requests:>5} {lv.failed:>4} {lv.duration_s:>7.2f} {lv.output_tok_per_s:>10.1f} "
            f"{lv.request_per_s:>7.2f} {_stat(lv.ttft_ms, 'median'):>9} {_stat(lv.ttft_ms, 'p99'):>9} "
            f"{_stat(lv.itl_ms, 'median', 2):>8} {_stat(lv.itl_ms, 'p99', 2):>8} {_stat(lv.tpot_ms, 'median', 2):>9} "
            f"{_stat(lv.e2e_ms, 'median'):>9} {_fmt(lv.accept_length, 2):>6} {max(1, len(lv.windows)):>3} "
            f"{_interval(lv)}"
        )
    for lv in result.levels:
        extra = []
        if lv.goodput is not None:
            extra.append(f"goodput {lv.goodput:.2f} req/s, SLO attainment {100 * (lv.slo_attainment or 0):.1f}%")
        if lv.offered_rate:
            extra.append(f"offered {lv.offered_rate:.2f} req/s")
        if lv.lateness is not None:
            extra.append(f"send lateness p99 {1000 * lv.lateness.p99_s:.1f} ms, max {1000 * lv.lateness.max_s:.1f} ms")
        if lv.traffic is not None:
            extra.append(
                f"prompt tokens mean {lv.traffic.prompt_tokens_mean:.0f}, output mean {lv.traffic.output_tokens_mean:.0f}, "
                f"prefix reuse {100 * lv.traffic.prefix_reuse:.1f}%"
            )
        if extra:
            lines.append(f"{lv.key!s:>8}: " + "; ".join(extra))
    if result.workload:
        lines.append(f"workload: {result.workload}")
    lines.append(f"time_scale={result.time_scale:g} server_accept_length={_fmt(result.server_accept_length, 2)}")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


def format_spread(results: list[BenchResult]) -> str:
    lines = ["output tok/s over repeats: level mean min max spread%(max-min)/mean"]
    for lv in results[0].levels:
        vals = [r.level(lv.key).output_tok_per_s for r in results]
        mean = sum(vals) / len(vals)
        spread = 100.0 * (max(vals) - min(vals)) / mean if mean else 0.0
        lines.append(f"{lv.key!s:>8} {mean:>10.1f} {min(vals):>10.1f} {max(vals):>10.1f} {spread:>6.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.repeats < 1:
        print(f"--repeats must be 1 or more, got {args.repeats}", file=sys.stderr)
        return 2
    # without a scheme ("127.0.0.1:30000") every request fails and the run would say the server is not running
    if not re.match(r"https?://[^/]", args.url.strip(), re.IGNORECASE):
        print(f"--url must be http://HOST:PORT or https://..., got {args.url!r}", file=sys.stderr)
        return 2
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
    try:
        rates = tuple(float(r) for r in args.rate.split(",") if r.strip())
        slo = SLO(**{k.strip(): float(v) for k, v in (x.split("=") for x in args.slo.split(",") if x.strip())})
    except (ValueError, TypeError) as exc:
        print(
            f"--rate must be comma-separated numbers and --slo NAME=MS pairs (ttft_ms, tpot_ms, itl_ms, e2e_ms): {exc}",
            file=sys.stderr,
        )
        return 2
    loads = (*(Load.closed(c) for c in concurrencies), *(Load.at_rate(r, args.burstiness) for r in rates))
    spec = WorkloadSpec(
        kind=args.kind or ("jsonl" if args.dataset else "synthetic"),
        context_len=args.context_len,
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
        loads=loads if rates else (),
        slo=None if slo.empty else slo,
    )
    try:
        check_plan(plan)
    except BenchError as exc:  # bad input, as the checks above: nothing was sent
        print(f"cannot run this plan: {exc}", file=sys.stderr)
        return 2
    results: list[BenchResult] = []
    try:
        for i in range(args.repeats):
            results.append(run_plan(args.url, plan))
            if not args.json:
                print(f"== run {i + 1}/{args.repeats} ==\n{format_table(results[-1])}", flush=True)
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
