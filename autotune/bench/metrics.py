"""Pure summaries of benchmark samples, with SGLang ``bench_serving``'s definitions.

- Distributions are in milliseconds: mean, median, p90, p99 (numpy's default linear percentiles). No values -> ``None``,
  never a silent 0.
- Throughputs count only successful requests' tokens, over the whole level duration.
- A level's accept length is sum(output tokens) / sum(verify steps) over the successful requests that report it.

``metric_value`` resolves a metric name (``output_tok_per_s``, ``ttft_ms.p99``, ...) at a load level; the scorer and the
exporter use it, and ``check_metric_name`` validates a name early (study config) with a message listing the valid ones.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from autotune.bench.goodput import goodput
from autotune.bench.load import LevelKey
from autotune.bench.stats import Interval, interval
from autotune.bench.types import SLO, BenchPlan, BenchResult, Dist, LevelSummary, RequestSample

MAX_ERRORS_KEPT = 5

SCALAR_METRICS = (
    "output_tok_per_s",
    "request_per_s",
    "input_tok_per_s",
    "accept_length",
    "goodput",
    "slo_attainment",
    "failed",
    "requests",
)
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


def summarize_level(
    concurrency: int,
    samples: Sequence[RequestSample],
    duration_s: float,
    *,
    slo: SLO | None = None,
    load: str = "",
) -> LevelSummary:
    """One load level: ``samples`` of all requests issued (failed ones included), ``duration_s`` in engine seconds;
    with an ``slo``, its goodput and SLO attainment; ``load`` an open-loop level's key."""
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
    good, attained = goodput(samples, slo, duration_s) if slo is not None and not slo.empty else (None, None)
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
        load=load,
        goodput=good,
        slo_attainment=attained,
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


def select_level(result: BenchResult, level: LevelKey) -> LevelSummary:
    """The level keyed ``level`` (a concurrency, or an open-loop key such as ``"rate8"``), or the highest (``"max"``) /
    lowest (``"min"``) concurrency measured (among the concurrency levels when there are any)."""
    if not result.levels:
        raise ValueError("the benchmark result has no load levels")
    if level in ("max", "min"):
        closed = [lv for lv in result.levels if not lv.load] or list(result.levels)
        pick = max if level == "max" else min
        return pick(closed, key=lambda lv: lv.concurrency)
    if isinstance(level, bool) or not isinstance(level, (int, str)):
        raise ValueError(f"load level must be 'max', 'min', a concurrency or a level key, got {level!r}")
    try:
        return result.level(level)
    except KeyError:
        measured = ", ".join(str(lv.key) for lv in result.levels)
        what = f"with concurrency {level}" if isinstance(level, int) else repr(level)
        raise ValueError(
            f"no load level {what}; measured: {measured} (name 'max', 'min' or a measured level; add a level to the "
            "study's load_levels)"
        ) from None


def level_value(lv: LevelSummary, metric: str) -> float | None:
    """``metric`` (a level metric name, not ``server_accept_length``) of one level or window; None when absent."""
    if metric in SCALAR_METRICS:
        value = getattr(lv, metric)
        return None if value is None else float(value)
    name, stat = metric.split(".")
    d: Dist | None = getattr(lv, name)
    return None if d is None else float(getattr(d, stat))


def metric_value(result: BenchResult, metric: str, level: LevelKey = "max") -> float | None:
    """The value of ``metric`` at ``level`` (the mean over the level's windows); ``None`` when the level has no such
    value (e.g. no successes, no spec)."""
    check_metric_name(metric)
    if metric == "server_accept_length":
        return result.server_accept_length
    return level_value(select_level(result, level), metric)


def metric_interval(result: BenchResult, metric: str, level: LevelKey = "max") -> Interval | None:
    """The 95% interval of ``metric`` at ``level`` over its windows; None for a level measured in one window."""
    check_metric_name(metric)
    if metric == "server_accept_length":
        return None
    return select_level(result, level).intervals.get(metric)


# ----------------------------------------------------------------------------------------------- windows of a level


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return math.fsum(vals) / len(vals) if vals else None


def _mean_dist(dists: Sequence[Dist | None]) -> Dist | None:
    present = [d for d in dists if d is not None]
    if not present:
        return None
    return Dist(
        mean=math.fsum(d.mean for d in present) / len(present),
        median=math.fsum(d.median for d in present) / len(present),
        p90=math.fsum(d.p90 for d in present) / len(present),
        p99=math.fsum(d.p99 for d in present) / len(present),
        count=sum(d.count for d in present),
    )


def aggregate_windows(
    concurrency: int, windows: Sequence[LevelSummary], stop_reason: str = "", **extra: object
) -> LevelSummary:
    """One level from its windows: every figure is the mean of the windows' figures (a latency statistic such as
    ``ttft_ms.p99`` is the mean of the windows' p99s), counts and durations are sums, and ``intervals`` holds the
    Student-t interval of every metric that all windows have."""
    if not windows:
        raise ValueError(f"level {concurrency}: no windows to aggregate")
    errors: list[str] = []
    for w in windows:
        for e in w.errors:
            if e not in errors and len(errors) < MAX_ERRORS_KEPT:
                errors.append(e)
    intervals: dict[str, Interval] = {}
    for name in METRIC_NAMES:
        values = [level_value(w, name) for w in windows]
        if all(v is not None for v in values):
            intervals[name] = interval([float(v) for v in values if v is not None])
    return LevelSummary(
        concurrency=concurrency,
        requests=sum(w.requests for w in windows),
        failed=sum(w.failed for w in windows),
        duration_s=math.fsum(w.duration_s for w in windows),
        output_tok_per_s=math.fsum(w.output_tok_per_s for w in windows) / len(windows),
        request_per_s=math.fsum(w.request_per_s for w in windows) / len(windows),
        input_tok_per_s=math.fsum(w.input_tok_per_s for w in windows) / len(windows),
        ttft_ms=_mean_dist([w.ttft_ms for w in windows]),
        itl_ms=_mean_dist([w.itl_ms for w in windows]),
        tpot_ms=_mean_dist([w.tpot_ms for w in windows]),
        e2e_ms=_mean_dist([w.e2e_ms for w in windows]),
        accept_length=_mean(w.accept_length for w in windows),
        errors=tuple(errors),
        windows=tuple(windows),
        intervals=intervals,
        stop_reason=stop_reason,
        load=windows[0].load,
        goodput=_mean(w.goodput for w in windows),
        slo_attainment=_mean(w.slo_attainment for w in windows),
        **extra,  # type: ignore[arg-type]  # traffic, lateness, offered_rate: the client's figures for the level
    )


def window_stop_reason(windows: Sequence[LevelSummary], plan: BenchPlan, elapsed_wall_s: float) -> str | None:
    """Why a level needs no further window, or None to measure another one.

    ``precision``: at least ``min_windows`` ran and the 95% interval of ``plan.precision_metric`` has a half-width
    within ``target_rel_ci`` of its mean; ``max_windows``: the cap on windows; ``time_cap``: the level's windows took
    ``max_level_wall_s``. A metric a window lacks (no successful request) never counts as precise."""
    n = len(windows)
    if n < plan.min_windows:
        return None
    values = [level_value(w, plan.precision_metric) for w in windows]
    if all(v is not None for v in values):
        rel = interval([float(v) for v in values if v is not None]).rel_half_width
        if rel is not None and rel <= plan.target_rel_ci:
            return "precision"
        if rel is None and len(set(values)) == 1 and values[0] == 0:
            return "precision"  # every window measured exactly 0: nothing more to learn
    if n >= plan.max_windows:
        return "max_windows"
    if plan.max_level_wall_s is not None and elapsed_wall_s >= plan.max_level_wall_s:
        return "time_cap"
    return None
