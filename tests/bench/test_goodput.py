"""Goodput and SLO attainment on known samples."""

from __future__ import annotations

import pytest

from autotune.bench.goodput import goodput, meets
from autotune.bench.metrics import aggregate_windows, summarize_level
from autotune.bench.types import SLO, RequestSample


def sample(ttft: float, e2e: float, out: int = 11, itl: tuple[float, ...] = (), ok: bool = True) -> RequestSample:
    return RequestSample(ok=ok, prompt_tokens=5, output_tokens=out, ttft_s=ttft, e2e_s=e2e, itl_s=itl)


SAMPLES = [
    sample(0.1, 1.1),  # TTFT 100 ms, TPOT 100 ms: good
    sample(0.3, 1.3),  # TTFT 300 ms: misses the TTFT SLO
    sample(0.1, 2.1),  # TPOT 200 ms: misses the TPOT SLO
    sample(0.1, 1.1, ok=False),  # failed: never good
]


def test_each_slo_is_checked_per_request() -> None:
    slo = SLO(ttft_ms=200, tpot_ms=150)
    assert [meets(s, slo) for s in SAMPLES] == [True, False, False, False]
    assert [meets(s, SLO(e2e_ms=1200)) for s in SAMPLES] == [True, False, False, False]
    assert meets(sample(0.1, 1.1, itl=(0.05,) * 9 + (0.5,)), SLO(itl_ms=100)) is False  # its p99 gap
    assert meets(sample(0.1, 1.1, itl=(0.05,) * 10), SLO(itl_ms=100)) is True


def test_goodput_is_good_requests_per_second() -> None:
    rate, attained = goodput(SAMPLES, SLO(ttft_ms=200, tpot_ms=150), duration_s=2.0)
    assert rate == pytest.approx(0.5) and attained == pytest.approx(0.25)
    rate, attained = goodput(SAMPLES, SLO(ttft_ms=1000), duration_s=4.0)
    assert rate == pytest.approx(0.75) and attained == pytest.approx(0.75)


def test_levels_carry_goodput_and_windows_average_it() -> None:
    slo = SLO(ttft_ms=200)
    w1 = summarize_level(0, SAMPLES, 2.0, slo=slo, load="rate2")
    w2 = summarize_level(0, SAMPLES[:2], 1.0, slo=slo, load="rate2")
    assert (w1.goodput, w1.slo_attainment, w1.key) == (1.0, 0.5, "rate2")
    agg = aggregate_windows(0, [w1, w2], "max_windows")
    assert agg.goodput == pytest.approx(1.0) and agg.slo_attainment == pytest.approx(0.5)
    assert agg.intervals["goodput"].n == 2 and agg.key == "rate2"
    assert summarize_level(4, SAMPLES, 2.0).goodput is None  # no SLO: no goodput
