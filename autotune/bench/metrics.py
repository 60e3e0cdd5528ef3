"""Pure summaries of benchmark samples, with SGLang ``bench_serving``'s definitions.

- Distributions are in milliseconds: mean, median, p90, p99 (numpy's default linear percentiles). No values -> ``None``,
  never a silent 0.
- Throughputs count only successful requests' tokens, over the whole level duration.
- A level's accept length is sum(output tokens) / sum(verify steps) over the successful requests that report it.

``metric_value`` resolves a metric name (``output_tok_per_s``, ``ttft_ms.p99``, ...) at a load level; the scorer and the
exporter use it, and ``check_metric_name`` validates a name early (study config) with a message listing the valid ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from autotune.bench.types import BenchResult, Dist, LevelSummary, RequestSample

MAX_ERRORS_KEPT = 5

SCALAR_METRICS = ("output_tok_per_s", "request_per_s", "input_tok_per_s", "accept_length", "failed", "requests")
DIST_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
DIST_STATS = ("mean", "median", "p90", "p99")
METRIC_NAMES = SCALAR_METRICS + tuple(f"{d}.{s}" for d in DIST_METRICS for s in DIST_STATS)


def dist(values_s: Iterable[float]) -> Dist | None:
    """Summary of durations given in seconds, reported in milliseconds; ``None`` when there are no values."""
    arr = np.fromiter(values_s, dtype=np.float64)
    if arr.size == 0:
        return None
    ms = arr * 1000.0
    p50, p90, p99 = np.percentile(ms, [50.0, 90.0, 99.0])
    return Dist(mean=float(ms.mean()), median=float(p50), p90=float(p90), p99=float(p99), count=int(arr.size))


def summarize_level(concurrency: int, samples: Sequence[RequestSample], duration_s: float) -> LevelSummary:
    """One load level: ``samples`` of all requests issued (failed ones included), ``duration_s`` in engine seconds."""
    if duration_s <= 0:
        raise ValueError(f"a level's duration must be > 0 s, got {duration_s}")
    ok = [s for s in samples if s.ok]
    out_tokens = sum(s.output_tokens for s in ok)
    in_tokens = sum(s.prompt_tokens for s in ok)
    itls = [x for s in ok for x in s.itl_s]
    errors: list[str] = []
    for s in samples:
        if not s.ok and s.error not in errors and len(errors) < MAX_ERRORS_KEPT:
            errors.append(s.error)
    return LevelSummary(
        concurrency=concurrency,
        requests=len(samples),
        failed=len(samples) - len(ok),
        duration_s=duration_s,
        output_tok_per_s=out_tokens / duration_s,
        request_per_s=len(ok) / duration_s,
        input_tok_per_s=in_tokens / duration_s,
        ttft_ms=dist(s.ttft_s for s in ok if s.ttft_s is not None),
        itl_ms=dist(itls),
        tpot_ms=dist(t for t in (s.tpot_s for s in ok) if t is not None),
        e2e_ms=dist(s.e2e_s for s in ok if s.e2e_s is not None),
        accept_length=accept_length(ok),
        errors=tuple(errors),
    )


def accept_length(samples: Iterable[RequestSample]) -> float | None:
    """sum(output tokens) / sum(verify steps) over successful samples that report speculation; else ``None``.

    A sample with only ``accept_length`` (no verify count) contributes ``output_tokens / accept_length`` verify steps.
    """
    tokens = 0.0
    steps = 0.0
    for s in samples:
        if not s.ok or s.output_tokens <= 0:
            continue
        if s.spec_verify_ct:
            tokens += s.output_tokens
            steps += s.spec_verify_ct
        elif s.accept_length:
            tokens += s.output_tokens
            steps += s.output_tokens / s.accept_length
    return tokens / steps if steps > 0 else None


def check_metric_name(metric: str) -> None:
    """Raise ``ValueError`` naming the valid metrics when ``metric`` is not one of them."""
    if metric not in METRIC_NAMES and metric != "server_accept_length":
        valid = ", ".join((*METRIC_NAMES, "server_accept_length"))
        raise ValueError(f"unknown benchmark metric {metric!r}; use one of: {valid}")


def select_level(result: BenchResult, level: int | str) -> LevelSummary:
    """The level at concurrency ``level``, or the highest (``"max"``) / lowest (``"min"``) concurrency measured."""
    if not result.levels:
        raise ValueError("the benchmark result has no load levels")
    if level == "max":
        return max(result.levels, key=lambda lv: lv.concurrency)
    if level == "min":
        return min(result.levels, key=lambda lv: lv.concurrency)
    if isinstance(level, bool) or not isinstance(level, int):
        raise ValueError(f"load level must be 'max', 'min' or a concurrency (int), got {level!r}")
    try:
        return result.level(level)
    except KeyError:
        measured = ", ".join(str(lv.concurrency) for lv in result.levels)
        raise ValueError(
            f"no load level with concurrency {level}; measured: {measured} (add it to the plan's concurrencies)"
        ) from None


def metric_value(result: BenchResult, metric: str, level: int | str = "max") -> float | None:
    """The value of ``metric`` at ``level``; ``None`` when the level has no such value (e.g. no successes, no spec)."""
    check_metric_name(metric)
    if metric == "server_accept_length":
        return result.server_accept_length
    lv = select_level(result, level)
    if metric in SCALAR_METRICS:
        value = getattr(lv, metric)
        return None if value is None else float(value)
    name, stat = metric.split(".")
    d: Dist | None = getattr(lv, name)
    return None if d is None else float(getattr(d, stat))
