"""Small-sample statistics without scipy: Student t intervals and Welch's t test.

A figure measured in ``n`` independent windows (or launches) is reported as its mean with a 95% interval
``mean +- t(0.975, n-1) * sd / sqrt(n)``, ``sd`` the sample standard deviation (``n - 1`` in the denominator). Two
configurations are compared with Welch's t test (unequal variances, Welch-Satterthwaite degrees of freedom).

The t distribution's CDF is computed from the regularized incomplete beta function (Lentz's continued fraction), and
its quantile by bisection on the CDF; both are exact to about 1e-10, well past what a benchmark needs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` (> 0, not necessarily whole) degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``t_quantile(0.975, 1) = 12.706``)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must be in (0, 1), got {p}")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class Interval:
    """Mean of ``n`` independent values with a Student-t interval. ``sd``, ``low``, ``high`` are None when n < 2."""

    mean: float
    sd: float | None
    n: int
    low: float | None
    high: float | None
    confidence: float = CONFIDENCE

    @property
    def half_width(self) -> float | None:
        return None if self.low is None or self.high is None else (self.high - self.low) / 2.0

    @property
    def rel_half_width(self) -> float | None:
        """Half-width / |mean| (0.05 = the mean is known to +-5%); None without an interval or with a zero mean."""
        hw = self.half_width
        if hw is None or self.mean == 0:
            return None
        return hw / abs(self.mean)

    def contains(self, value: float) -> bool:
        return self.low is not None and self.high is not None and self.low <= value <= self.high


def mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var)


def interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """The mean of ``values`` with its two-sided ``confidence`` Student-t interval."""
    mean, sd = mean_sd(values)
    n = len(values)
    if sd is None:
        return Interval(mean=mean, sd=None, n=n, low=None, high=None, confidence=confidence)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return Interval(mean=mean, sd=sd, n=n, low=mean - half, high=mean + half, confidence=confidence)


def pooled_relative_sd(groups: Sequence[Sequence[float]]) -> tuple[float, int] | None:
    """The relative sd (sd / mean) that several groups share, pooled by degrees of freedom:
    ``sqrt(sum((n_i - 1) * (sd_i / mean_i)^2) / sum(n_i - 1))`` over the groups with at least 2 values and a non-zero
    mean, and those degrees of freedom; None when there are none. For launches of different configs whose spread is
    proportional to their level (the same relative launch-to-launch noise), so each config's few launches lend the
    others their information about the spread."""
    num, df = 0.0, 0
    for g in groups:
        mean, sd = mean_sd(g) if g else (0.0, None)
        if sd is None or mean == 0:
            continue
        num += (len(g) - 1) * (sd / mean) ** 2
        df += len(g) - 1
    return (math.sqrt(num / df), df) if df else None


def prediction_interval(
    values: Sequence[float], confidence: float = CONFIDENCE, spread: tuple[float, int] | None = None
) -> tuple[float, float] | None:
    """Where ONE new value from the same distribution falls with probability ``confidence`` (normal model):
    ``mean ± t(n - 1) · sd · sqrt(1 + 1/n)``. None when n < 2. Wider than the mean's interval: it adds the new value's
    own spread to the uncertainty of the mean. ``spread`` = (relative sd, degrees of freedom) from
    ``pooled_relative_sd``: that sd (times the mean) and t with those degrees of freedom instead of the values' own."""
    n = len(values)
    if spread is not None:
        rel, df = spread
        mean = math.fsum(values) / n
        half = t_quantile(0.5 + confidence / 2.0, df) * rel * abs(mean) * math.sqrt(1.0 + 1.0 / n)
        return mean - half, mean + half
    mean, sd = mean_sd(values)
    if sd is None:
        return None
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * sd * math.sqrt(1.0 + 1.0 / n)
    return mean - half, mean + half


@dataclass(frozen=True)
class WelchResult:
    t: float
    df: float
    p_value: float  # two-sided


def welch(a: Sequence[float], b: Sequence[float]) -> WelchResult:
    """Welch's two-sample t test of equal means. Needs at least 2 values on each side."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"Welch's t test needs at least 2 values per group, got {len(a)} and {len(b)}")
    ma, sa = mean_sd(a)
    mb, sb = mean_sd(b)
    assert sa is not None and sb is not None
    va, vb = sa * sa / len(a), sb * sb / len(b)
    if va + vb == 0.0:
        if ma == mb:
            return WelchResult(t=0.0, df=float(len(a) + len(b) - 2), p_value=1.0)
        return WelchResult(t=math.copysign(math.inf, ma - mb), df=float(len(a) + len(b) - 2), p_value=0.0)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    return WelchResult(t=t, df=df, p_value=min(1.0, max(0.0, p)))


def launches_to_separate(a: Sequence[float], b: Sequence[float], alpha: float = 0.05, most: int = 20) -> int | None:
    """The fewest launches a side (more than each has now, at most ``most``) at which Welch's test would separate
    ``a`` from ``b`` (p < ``alpha``) if their means and sds stayed as measured: a difference of that size is then
    separated about half of the time. None where the means are equal, a side has one value, or no count up to
    ``most`` would. Where neither side varies, the means separate at any count (as ``welch`` says)."""
    ma, sa = mean_sd(a)
    mb, sb = mean_sd(b)
    if sa is None or sb is None or ma == mb:
        return None
    for n in range(max(len(a), len(b)) + 1, most + 1):
        va, vb = sa * sa / n, sb * sb / n
        if va + vb == 0.0:
            return n
        df = (va + vb) ** 2 / ((va * va + vb * vb) / (n - 1))
        if 2.0 * (1.0 - t_cdf(abs(ma - mb) / math.sqrt(va + vb), df)) < alpha:
            return n
    return None


@dataclass(frozen=True)
class KSResult:
    statistic: float  # D: the largest gap between the sample's CDF and the reference CDF
    p_value: float  # asymptotic (Kolmogorov distribution, with Stephens' small-sample correction)


def kolmogorov_sf(x: float) -> float:
    """P(K > x) for the Kolmogorov distribution: ``2 sum_k (-1)^(k-1) exp(-2 k^2 x^2)``."""
    if x <= 0.0:
        return 1.0
    if x < 0.2:
        return 1.0  # the series converges slowly there and the value is 1 to 1e-10
    total = 0.0
    for k in range(1, 101):
        term = 2.0 * (-1.0) ** (k - 1) * math.exp(-2.0 * k * k * x * x)
        total += term
        if abs(term) < 1e-16:
            break
    return min(1.0, max(0.0, total))


def ks_exponential(samples: Sequence[float], rate: float) -> KSResult:
    """One-sample Kolmogorov-Smirnov test of ``samples`` against the exponential distribution of ``rate`` (the
    inter-arrival times of a Poisson process of that rate)."""
    n = len(samples)
    if n < 2 or rate <= 0:
        raise ValueError(f"the KS test needs at least 2 samples and a rate > 0 (got {n}, {rate})")
    xs = sorted(samples)
    d = 0.0
    for i, x in enumerate(xs):
        cdf = 1.0 - math.exp(-rate * x) if x > 0 else 0.0
        d = max(d, (i + 1) / n - cdf, cdf - i / n)
    sqrt_n = math.sqrt(n)
    return KSResult(d, kolmogorov_sf((sqrt_n + 0.12 + 0.11 / sqrt_n) * d))
