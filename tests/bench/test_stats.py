"""Intervals and Welch's test against hand calculations (published t tables), and the per-level window rules."""

from __future__ import annotations

import math

import pytest

from autotune.bench.metrics import aggregate_windows, metric_interval, metric_value, window_stop_reason
from autotune.bench.stats import interval, pooled_relative_sd, prediction_interval, t_cdf, t_quantile, welch
from autotune.bench.types import BenchPlan, BenchResult, Dist, LevelSummary, WorkloadSpec

# t(0.975, df) from any printed Student t table
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 20: 2.086, 30: 2.042, 120: 1.980}


@pytest.mark.parametrize(("df", "expected"), sorted(T975.items()))
def test_t_quantile_matches_the_table(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=6e-4)
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-9)


def test_t_cdf_known_values() -> None:
    assert t_cdf(0.0, 3) == 0.5
    assert t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy: 1/2 + atan(1)/pi
    assert t_cdf(2.0, 2) == pytest.approx(0.5 + 2.0 / (2.0 * math.sqrt(6.0)))  # closed form for df=2


def test_interval_by_hand() -> None:
    # 10, 12, 14: mean 12, sd 2, n 3; half-width = 4.303 * 2 / sqrt(3) = 4.9686
    iv = interval([10.0, 12.0, 14.0])
    assert (iv.mean, iv.sd, iv.n) == (12.0, pytest.approx(2.0), 3)
    assert iv.half_width == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-4)
    assert iv.low == pytest.approx(12 - 4.9686, abs=1e-3) and iv.high == pytest.approx(12 + 4.9686, abs=1e-3)
    assert iv.rel_half_width == pytest.approx(4.9686 / 12, abs=1e-4)
    one = interval([5.0])
    assert (one.mean, one.sd, one.low, one.high, one.half_width) == (5.0, None, None, None, None)


def test_welch_by_hand() -> None:
    a, b = [1.0, 2.0, 3.0, 4.5], [2.0, 3.1, 5.0, 6.0, 7.0]
    ma, mb = sum(a) / 4, sum(b) / 5
    va = sum((x - ma) ** 2 for x in a) / 3 / 4
    vb = sum((x - mb) ** 2 for x in b) / 4 / 5
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 4)
    w = welch(a, b)
    assert w.t == pytest.approx(t) and w.df == pytest.approx(df)
    assert w.p_value == pytest.approx(0.13601, abs=1e-4)  # scipy.stats.ttest_ind(a, b, equal_var=False)
    assert welch([1.0, 1.0], [1.0, 1.0]).p_value == 1.0
    assert welch([1.0, 1.0], [2.0, 2.0]).p_value == 0.0
    with pytest.raises(ValueError, match="at least 2"):
        welch([1.0], [1.0, 2.0])


def window(tput: float, ttft_p99: float = 50.0) -> LevelSummary:
    d = Dist(mean=ttft_p99 / 2, median=ttft_p99 / 2, p90=ttft_p99 * 0.9, p99=ttft_p99, count=4)
    return LevelSummary(
        concurrency=8,
        requests=4,
        failed=0,
        duration_s=2.0,
        output_tok_per_s=tput,
        request_per_s=2.0,
        input_tok_per_s=tput / 2,
        ttft_ms=d,
        itl_ms=None,
        tpot_ms=d,
        e2e_ms=d,
        accept_length=None,
    )


PLAN = BenchPlan(workload=WorkloadSpec(), min_windows=2, max_windows=4, target_rel_ci=0.05, max_level_wall_s=60.0)


def test_windows_stop_at_precision() -> None:
    assert window_stop_reason([window(1000.0)], PLAN, 1.0) is None  # below min_windows
    # 1000, 1010: mean 1005, sd 7.07, half-width 12.706 * 7.07 / sqrt 2 = 63.5 -> 6.3% > 5%
    assert window_stop_reason([window(1000.0), window(1010.0)], PLAN, 1.0) is None
    # 1000, 1004: half-width 25.4 -> 2.5%
    assert window_stop_reason([window(1000.0), window(1004.0)], PLAN, 1.0) == "precision"


def test_windows_stop_at_the_caps() -> None:
    noisy = [window(1000.0), window(1500.0), window(800.0), window(1300.0)]
    assert window_stop_reason(noisy[:3], PLAN, 1.0) is None
    assert window_stop_reason(noisy, PLAN, 1.0) == "max_windows"
    assert window_stop_reason(noisy[:2], PLAN, 60.0) == "time_cap"
    no_cap = BenchPlan(workload=WorkloadSpec(), max_windows=10, max_level_wall_s=None)
    assert window_stop_reason(noisy, no_cap, 1e9) is None


def test_precision_uses_the_plan_metric() -> None:
    plan = BenchPlan(workload=WorkloadSpec(), precision_metric="ttft_ms.p99", max_windows=4)
    steady_tput_noisy_ttft = [window(1000.0, 40.0), window(1000.0, 80.0)]
    assert window_stop_reason(steady_tput_noisy_ttft, plan, 0.0) is None
    assert window_stop_reason(steady_tput_noisy_ttft, PLAN, 0.0) == "precision"


def test_aggregate_is_the_mean_with_intervals() -> None:
    lv = aggregate_windows(8, [window(1000.0, 40.0), window(1200.0, 60.0), window(1100.0, 50.0)], "max_windows")
    assert lv.output_tok_per_s == pytest.approx(1100.0)
    assert lv.ttft_ms is not None and lv.ttft_ms.p99 == pytest.approx(50.0) and lv.ttft_ms.count == 12
    assert (lv.requests, lv.duration_s, len(lv.windows), lv.stop_reason) == (12, 6.0, 3, "max_windows")
    iv = lv.intervals["output_tok_per_s"]
    assert (iv.n, iv.mean, iv.sd) == (3, pytest.approx(1100.0), pytest.approx(100.0))
    assert iv.half_width == pytest.approx(4.303 * 100 / math.sqrt(3), rel=1e-4)
    assert "itl_ms.p99" not in lv.intervals  # no window has ITL
    result = BenchResult(levels=(lv,))
    assert metric_value(result, "output_tok_per_s") == pytest.approx(1100.0)  # what the sampler is told
    assert metric_interval(result, "ttft_ms.p99") == lv.intervals["ttft_ms.p99"]
    back = BenchResult.from_json(result.to_json())
    assert back == result


def test_the_interval_for_one_new_value_and_a_spread_pooled_over_groups() -> None:
    # 100, 110, 120: mean 110, sd 10; one new value: 110 +- t(2) * 10 * sqrt(1 + 1/3)
    low, high = prediction_interval([100.0, 110.0, 120.0])
    assert (high - low) / 2 == pytest.approx(T975[2] * 10.0 * math.sqrt(4 / 3), rel=2e-4)
    assert prediction_interval([5.0]) is None
    # relative sds sqrt(200)/100 (df 1: 90, 110) and 10/200 (df 2: 190, 200, 210); a single value adds nothing
    rel, df = pooled_relative_sd([[90.0, 110.0], [190.0, 200.0, 210.0], [7.0]])
    assert df == 3 and rel == pytest.approx(math.sqrt((1 * (math.sqrt(200) / 100) ** 2 + 2 * (10 / 200) ** 2) / 3))
    assert pooled_relative_sd([[1.0], [2.0]]) is None
    # a single value gets an interval from the pooled spread: 100 +- t(3) * rel * 100 * sqrt(2)
    low, high = prediction_interval([100.0], spread=(rel, df))
    assert (high - low) / 2 == pytest.approx(T975[3] * rel * 100.0 * math.sqrt(2), rel=2e-4)


def test_launches_to_separate() -> None:
    """Welch's test on the measured means and sds, at more launches a side: the h100-real-ngram-verdict relaunches
    (8,602 and 14,522 against 6,912 and 5,959) separate at 6 a side; equal means never. A side without spread still
    has a Welch test (the other side's spread); two sides without spread and different means separate at once."""
    from autotune.bench.stats import launches_to_separate

    assert launches_to_separate([8601.9, 14522.2], [6912.4, 5959.0]) == 6
    assert launches_to_separate([1.0, 2.0], [1.0, 2.0]) is None
    assert launches_to_separate([1.0, 1.0], [2.0, 3.0]) == 4  # t = 2.12 sqrt(n), df = n - 1: p 0.067 at 3, 0.024 at 4
    assert launches_to_separate([1.0, 1.0], [2.0, 2.0]) == 3  # more than each has now
    assert launches_to_separate([1.0, 1.0], [1.0, 1.0]) is None
    assert launches_to_separate([100.0, 101.0], [100.0, 100.5], most=20) is None  # would need far more than 20
    assert launches_to_separate([10.0, 12.0], [8.0, 10.0]) == 6  # t = sqrt(n), df = 2(n - 1): p 0.055 at 5, 0.034 at 6
