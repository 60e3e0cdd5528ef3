"""Load levels: keys, checks, and arrival times checked against their distribution (KS test), not a tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.bench.load import Load, arrival_times, sort_key, trace_times
from autotune.bench.stats import kolmogorov_sf, ks_exponential


def test_keys_are_stable_and_concurrency_stays_an_int() -> None:
    assert Load.closed(8).key == 8
    assert Load.at_rate(8).key == "rate8"
    assert Load.at_rate(32, 0.5).key == "rate32b0.5"
    assert Load.replay().key == "trace" and Load.replay(0.5).key == "trace0.5"
    keys = ["rate32", 8, "trace", 1, "rate8b0.5"]
    assert sorted(keys, key=sort_key) == [1, 8, "rate8b0.5", "rate32", "trace"]


@pytest.mark.parametrize(
    ("load", "text"),
    [
        (Load.at_rate(0), "rate must be a finite number > 0"),
        (Load.at_rate(float("inf")), "rate must be a finite number > 0"),
        (Load.at_rate(4, 0), "burstiness must be > 0"),
        (Load.closed(0), "concurrency level must be an integer >= 1"),
        (Load.replay(0), "time_scale must be > 0"),
    ],
)
def test_bad_loads_say_what_is_wrong(load: Load, text: str) -> None:
    problem = load.check()
    assert problem is not None and text in problem


def test_kolmogorov_sf_matches_known_values() -> None:
    assert kolmogorov_sf(1.36) == pytest.approx(0.0494, abs=5e-4)  # the familiar 5% critical value
    assert kolmogorov_sf(1.63) == pytest.approx(0.0098, abs=5e-4)  # 1%
    assert kolmogorov_sf(0.5) == pytest.approx(0.9639, abs=5e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_poisson_arrivals_fit_the_set_rate_over_1000_requests(seed: int) -> None:
    times = arrival_times(Load.at_rate(8.0), 1001, seed)
    gaps = np.diff(times)
    assert times[0] == 0.0 and np.all(gaps > 0)
    assert ks_exponential(gaps.tolist(), 8.0).p_value > 0.01  # consistent with Exp(rate 8)
    # The same test rejects a rate 30% off (over 1,000 gaps it has the power for that): it can fail.
    assert ks_exponential(gaps.tolist(), 8.0 * 1.3).p_value < 0.01
    assert ks_exponential(gaps.tolist(), 8.0 / 1.3).p_value < 0.01


def test_gamma_burstiness_keeps_the_rate_and_sets_the_spread() -> None:
    gaps = np.diff(arrival_times(Load.at_rate(10.0, 0.25), 20001, 4))
    assert gaps.mean() == pytest.approx(0.1, rel=0.05)
    cv2 = gaps.var() / gaps.mean() ** 2  # gamma with shape b: squared coefficient of variation 1 / b
    assert cv2 == pytest.approx(4.0, rel=0.1)
    assert ks_exponential(gaps.tolist(), 10.0).p_value < 1e-6  # not Poisson


def test_arrivals_are_reproducible_per_seed_and_window() -> None:
    a = arrival_times(Load.at_rate(5), 50, 7, window=0)
    assert np.array_equal(a, arrival_times(Load.at_rate(5), 50, 7, window=0))
    assert not np.array_equal(a, arrival_times(Load.at_rate(5), 50, 7, window=1))


def test_trace_times_start_at_zero_and_scale() -> None:
    assert trace_times([2.0, 2.5, 4.0], Load.replay(0.5)).tolist() == [0.0, 0.25, 1.0]
