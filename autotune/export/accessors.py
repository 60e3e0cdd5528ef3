"""Pure accessors over trial records: per-level figures, speculation, compact formatting. No I/O."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autotune.bench.metrics import metric_interval
from autotune.bench.stats import Interval
from autotune.bench.types import LevelSummary
from autotune.engines.sglang_facts import is_given
from autotune.engines.sglang_facts import speculative_algorithm as sglang_speculative_algorithm
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord


def level(record: TrialRecord, concurrency: int | str) -> LevelSummary | None:
    """The record's summary at one load level (a concurrency, or an open-loop level's key such as ``"rate8"``), or
    None when the level was not measured."""
    if record.bench is None:
        return None
    for lv in record.bench.levels:
        if lv.key == concurrency:
            return lv
    return None


def level_label(key: int | str) -> str | int:
    """A level for a table: a concurrency as it is; ``rate8`` as ``8 req/s``; ``rate32b0.5`` with its burstiness."""
    if isinstance(key, int):
        return key
    if key.startswith("rate"):
        rate, _, burst = key[4:].partition("b")
        return f"{rate} req/s" + (f" (burstiness {burst})" if burst else "")
    return "trace timing" + ("" if key == "trace" else f" x{key[5:]}")


def goodput(record: TrialRecord, key: int | str) -> float | None:
    """Requests/s meeting every SLO at one level; None without SLOs or the level."""
    lv = level(record, key)
    return _finite(lv.goodput) if lv is not None and lv.goodput is not None else None


def throughput(record: TrialRecord, concurrency: int | str) -> float | None:
    lv = level(record, concurrency)
    return _finite(lv.output_tok_per_s) if lv is not None else None


def tpot_median(record: TrialRecord, concurrency: int | str) -> float | None:
    lv = level(record, concurrency)
    return _finite(lv.tpot_ms.median) if lv is not None and lv.tpot_ms is not None else None


def ttft_p99(record: TrialRecord, concurrency: int | str) -> float | None:
    lv = level(record, concurrency)
    return _finite(lv.ttft_ms.p99) if lv is not None and lv.ttft_ms is not None else None


def interval(record: TrialRecord, concurrency: int, metric: str) -> Interval | None:
    """The 95% interval of ``metric`` at one level over its windows; None for a level measured once or not at all."""
    lv = level(record, concurrency)
    return lv.intervals.get(metric) if lv is not None else None


def objective_interval(record: TrialRecord, objective: Objective) -> Interval | None:
    """The interval behind an objective's value: at its level as the objective's value is read (``max`` / ``min``: the
    highest / lowest concurrency level, never an open-loop one; ``rate8``: that level); None where it has none."""
    if record.bench is None or not record.bench.levels:
        return None
    try:
        return metric_interval(record.bench, objective.metric, objective.level)
    except ValueError:  # the level was not measured
        return None


def fmt_pm(value: float | None, iv: Interval | None, digits: int = 1, *, thousands: bool = False) -> str:
    """``value ±h%``: the figure with the half-width of its 95% interval relative to it (none without windows)."""
    text = fmt(value, digits, thousands=thousands)
    rel = iv.rel_half_width if iv is not None else None
    if text == "-" or rel is None:
        return text
    return f"{text} ±{100.0 * rel:.1f}%"


def accept_lengths(record: TrialRecord) -> tuple[float, ...]:
    """Every accept length the record carries: per level, then the server's lifetime value."""
    if record.bench is None:
        return ()
    values = [lv.accept_length for lv in record.bench.levels]
    values.append(record.bench.server_accept_length)
    return tuple(v for v in values if v is not None and math.isfinite(v))


def flag_value(record: TrialRecord, name: str) -> Any:
    """A server flag's value from ``record.flags``; falls back to the option the trial's launch gave."""
    if name in record.flags:
        return record.flags[name]
    return record.launch.option(name) if record.launch is not None else None


def is_set(value: Any) -> bool:
    """True for a flag value that puts the flag on the command line (not None / False)."""
    return is_given(value)


def speculative_algorithm(record: TrialRecord) -> str | None:
    """The trial's ``--speculative-algorithm`` as given, or None when speculation was off."""
    return sglang_speculative_algorithm(record.flags)


def is_speculative(record: TrialRecord) -> bool:
    """Speculation is on when ``flags`` has ``speculative-algorithm`` set to an algorithm."""
    return speculative_algorithm(record) is not None


def draft_model_path(record: TrialRecord) -> str | None:
    value = flag_value(record, "speculative-draft-model-path")
    return str(value) if is_set(value) else None


def outcome_label(record: TrialRecord) -> str:
    if record.outcome is TrialOutcome.COMPLETE:
        return "complete"
    if record.failure is not None:
        return f"{record.outcome.value}:{record.failure.value}"
    return record.outcome.value


def format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def compact_params(params: Mapping[str, Any], *, shorten_paths: bool = True) -> str:
    """``k=v`` pairs in sampler order, skipping inactive (None) conditional parameters."""
    parts = []
    for key, value in params.items():
        if value is None:
            continue
        text = format_value(value)
        if shorten_paths and "/" in text.rstrip("/"):
            text = "…/" + text.rstrip("/").rsplit("/", 1)[1]
        parts.append(f"{key}={text}")
    return ", ".join(parts) if parts else "(defaults)"


def fmt(value: float | None, digits: int = 1, *, thousands: bool = False) -> str:
    """A number for tables; '-' when missing."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:,.{digits}f}" if thousands else f"{value:.{digits}f}"


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
