"""Goodput: requests per second that met every SLO, and the share of requests that did (pure).

A request meets the SLO (``autotune.bench.types.SLO``) when it succeeded and its TTFT, TPOT, p99 inter-token gap and
e2e latency are each within their limit (a limit left None is not checked; a figure the request lacks, such as the
TPOT of a one-token answer, is not held against it). Failed requests count in the denominator of the attainment.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autotune.bench.types import SLO, RequestSample


def meets(s: RequestSample, slo: SLO) -> bool:
    if not s.ok:
        return False
    checks = (
        (slo.ttft_ms, s.ttft_s),
        (slo.tpot_ms, s.tpot_s),
        (slo.e2e_ms, s.e2e_s),
        (slo.itl_ms, float(np.percentile(s.itl_s, 99.0)) if s.itl_s else None),
    )
    return all(limit is None or value is None or value * 1000.0 <= limit for limit, value in checks)


def goodput(samples: Sequence[RequestSample], slo: SLO, duration_s: float) -> tuple[float, float]:
    """(good requests per engine second, good requests / all requests) of one window."""
    if duration_s <= 0:
        raise ValueError(f"a level's duration must be > 0 s, got {duration_s}")
    good = sum(1 for s in samples if meets(s, slo))
    return good / duration_s, (good / len(samples) if samples else 0.0)
