"""The study's expected time to finish, from measured trial times and the number of trials that run at once."""

from __future__ import annotations

import heapq
from collections.abc import Sequence


def eta_seconds(
    *,
    trial_s: Sequence[float],
    running_elapsed: Sequence[float],
    to_start: int,
    concurrency: int,
    start_within: float | None = None,
) -> float | None:
    """Seconds until the last trial ends, or None before any trial has finished (nothing measured yet).

    Every trial is assumed to take the mean of ``trial_s`` (the finished trials' wall times). A running trial needs
    what is left of that mean (at least nothing); trials not started yet go, one by one, to whichever of the
    ``concurrency`` slots frees first, as long as it frees within ``start_within`` seconds (the time box's last start;
    None: no limit).
    """
    if not trial_s:
        return None
    mean = sum(trial_s) / len(trial_s)
    slots = max(1, concurrency)
    free_at = [max(mean - e, 0.0) for e in running_elapsed][:slots]
    free_at += [0.0] * (slots - len(free_at))
    heapq.heapify(free_at)
    for _ in range(max(0, to_start)):
        if start_within is not None and free_at[0] > start_within:
            break
        heapq.heappush(free_at, heapq.heappop(free_at) + mean)
    return max(free_at)


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
