"""Metric summaries on hand-computed inputs."""

from __future__ import annotations

import pytest

from autotune.bench.metrics import (
    METRIC_NAMES,
    accept_length,
    check_metric_name,
    dist,
    metric_value,
    summarize_level,
)
from autotune.bench.types import BenchResult, Dist, LevelSummary, RequestSample


def ok(out: int = 10, ttft: float = 0.1, e2e: float = 1.0, itl: tuple[float, ...] = (), **kw: object) -> RequestSample:
    return RequestSample(ok=True, prompt_tokens=5, output_tokens=out, ttft_s=ttft, e2e_s=e2e, itl_s=itl, **kw)


def test_dist_linear_percentiles_in_ms() -> None:
    d = dist([1.0, 2.0, 3.0, 4.0])
    assert d == Dist(mean=pytest.approx(2500.0), median=pytest.approx(2500.0), p90=pytest.approx(3700.0),
                     p99=pytest.approx(3970.0), count=4)  # fmt: skip


def test_dist_single_value_and_empty() -> None:
    d = dist([0.25])
    assert d is not None and (d.mean, d.median, d.p90, d.p99, d.count) == (250.0, 250.0, 250.0, 250.0, 1)
    assert dist([]) is None


def test_summarize_level_excludes_failed_requests() -> None:
    samples = [
        ok(out=10, ttft=0.1, e2e=1.0, itl=(0.1, 0.1)),
        ok(out=30, ttft=0.3, e2e=2.0, itl=(0.2,)),
        RequestSample(ok=False, output_tokens=999, ttft_s=50.0, e2e_s=60.0, error="HTTP 500: boom"),
        RequestSample(ok=False, error="HTTP 500: boom"),
        RequestSample(ok=False, error="timeout after 5 s"),
    ]
    lv = summarize_level(8, samples, duration_s=4.0)
    assert (lv.concurrency, lv.requests, lv.failed) == (8, 5, 3)
    assert lv.output_tok_per_s == pytest.approx(40 / 4.0)
    assert lv.request_per_s == pytest.approx(2 / 4.0)
    assert lv.input_tok_per_s == pytest.approx(10 / 4.0)
    assert lv.ttft_ms is not None and lv.ttft_ms.count == 2 and lv.ttft_ms.mean == pytest.approx(200.0)
    assert lv.e2e_ms is not None and lv.e2e_ms.p99 == pytest.approx(1000.0 + 0.99 * 1000.0)
    assert lv.itl_ms is not None and lv.itl_ms.count == 3 and lv.itl_ms.median == pytest.approx(100.0)
    # tpot = (e2e - ttft) / (out - 1): 0.9/9 = 0.1 s and 1.7/29 s
    assert lv.tpot_ms is not None and lv.tpot_ms.mean == pytest.approx(1000 * (0.1 + 1.7 / 29) / 2)
    assert lv.errors == ("HTTP 500: boom", "timeout after 5 s")
    assert lv.accept_length is None


def test_zero_successes_gives_none_distributions_not_zero() -> None:
    lv = summarize_level(4, [RequestSample(ok=False, error="x")] * 3, duration_s=2.0)
    assert (lv.ttft_ms, lv.itl_ms, lv.tpot_ms, lv.e2e_ms, lv.accept_length) == (None, None, None, None, None)
    assert lv.output_tok_per_s == 0.0 and lv.failed == 3


def test_summarize_level_rejects_non_positive_duration() -> None:
    with pytest.raises(ValueError, match="duration"):
        summarize_level(1, [ok()], duration_s=0.0)


def test_accept_length_is_token_weighted_over_reporting_requests() -> None:
    samples = [
        ok(out=30, spec_verify_ct=10, accept_length=3.0),
        ok(out=10, spec_verify_ct=10, accept_length=1.0),
        ok(out=20, accept_length=2.0),  # no verify count: contributes 20 / 2 = 10 steps
        ok(out=50),  # no speculation reported: ignored
        RequestSample(ok=False, output_tokens=100, spec_verify_ct=1, error="x"),  # failed: ignored
    ]
    assert accept_length(samples) == pytest.approx(60 / 30)
    assert summarize_level(1, samples, 1.0).accept_length == pytest.approx(2.0)


def _result() -> BenchResult:
    def level(c: int, tput: float, ttft: Dist | None) -> LevelSummary:
        return LevelSummary(c, 10, 0, 1.0, tput, 2.0 * c, 3.0, ttft, None, None, None, 1.5 if c == 1 else None)

    d = Dist(mean=10.0, median=9.0, p90=20.0, p99=30.0, count=10)
    return BenchResult(
        levels=(level(8, 800.0, d), level(1, 100.0, d), level(32, 3200.0, None)), server_accept_length=2.5
    )


@pytest.mark.parametrize(
    ("metric", "level", "expected"),
    [
        ("output_tok_per_s", "max", 3200.0),
        ("output_tok_per_s", "min", 100.0),
        ("output_tok_per_s", 8, 800.0),
        ("request_per_s", 8, 16.0),
        ("ttft_ms.p99", 8, 30.0),
        ("ttft_ms.median", "min", 9.0),
        ("ttft_ms.p99", "max", None),  # no successes there: no distribution
        ("itl_ms.mean", 1, None),
        ("accept_length", "min", 1.5),
        ("accept_length", "max", None),
        ("server_accept_length", "max", 2.5),
    ],
)
def test_metric_value(metric: str, level: int | str, expected: float | None) -> None:
    assert metric_value(_result(), metric, level) == expected


def test_metric_value_rejects_unknown_names_and_levels() -> None:
    with pytest.raises(ValueError, match="unknown benchmark metric 'ttft_ms.p95'.*ttft_ms.p99"):
        metric_value(_result(), "ttft_ms.p95", "max")
    with pytest.raises(ValueError, match="no load level with concurrency 64; measured: 8, 1, 32"):
        metric_value(_result(), "output_tok_per_s", 64)
    with pytest.raises(ValueError, match="'max', 'min'"):
        metric_value(_result(), "output_tok_per_s", "peak")
    for name in METRIC_NAMES:
        check_metric_name(name)
