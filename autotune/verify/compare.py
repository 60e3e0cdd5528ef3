"""The verdict of ``python -m autotune.verify``: each figure measured again against the study's figure and interval.

Pure. The study's figures come from ``best/best.json``: the exported config's levels pooled over its finalist
relaunches (``across_launches``: per metric the mean across launches, the 95% interval of that mean ``low``..``high``
and the 95% interval for ONE new launch ``new_launch_low``..``new_launch_high``), or else its trial's own levels (the
interval across its windows). A new launch measured by verify is judged against the new-launch interval where the study
has one (a new launch varies by the launch-to-launch spread around the mean, not by the mean's uncertainty alone), else
against the interval recorded; where the record has none, against the study's figure +- ``tolerance`` (relative), and
the verdict says which. Where verify measured in windows too and its interval overlaps the study's although its figure
lies outside, the verdict says "intervals overlap": shown, but it does not pass (a pass is the figure inside the study's
interval as reported, never a widened one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from autotune.bench.stats import interval, pooled_relative_sd, prediction_interval

# metric name -> (key of the level summary, sub-key of its distribution or None)
METRICS: Mapping[str, tuple[str, str | None]] = {
    "output_tok_per_s": ("output_tok_per_s", None),
    "tpot_ms.median": ("tpot_ms", "median"),
    "ttft_ms.p99": ("ttft_ms", "p99"),
    "itl_ms.median": ("itl_ms", "median"),
    "goodput": ("goodput", None),  # requests/s meeting every SLO, where the study set SLOs
}
JUDGED_DEFAULT = ("output_tok_per_s", "tpot_ms.median")

Verdict = Literal[
    "within interval",
    "intervals overlap",
    "outside interval",
    "beyond machine variation",
    "within tolerance",
    "outside tolerance",
    "not measured",
]
# The machine-to-machine variation known so far (relative to the study's figure): an H200 study's exported winner,
# relaunched on another node two days later, measured 9-12% above its study's figures at concurrency 16 and 64. A study's
# intervals cover relaunches on the measured machine only; a figure outside them by less than this may be the machine,
# by more than this is a change the known variation does not explain.
MACHINE_VARIATION = 0.12
AGREES: tuple[Verdict, ...] = ("within interval", "within tolerance")


@dataclass(frozen=True)
class Figure:
    """One metric at one load level: the study's value (and interval), the value measured again, the verdict."""

    concurrency: int | str  # an open-loop level by its load (``rate8``)
    metric: str
    study: float | None
    low: float | None  # the study's 95% interval, when the record has one
    high: float | None
    n: int | None  # windows behind the study's interval
    measured: float | None
    measured_low: float | None  # verify's own 95% interval (its windows), when measured in windows
    measured_high: float | None
    judged: bool  # counts for the exit code
    verdict: Verdict

    @property
    def ok(self) -> bool:
        return not self.judged or self.verdict in AGREES

    @property
    def rel_diff(self) -> float | None:
        if self.study in (None, 0) or self.measured is None:
            return None
        return (self.measured - self.study) / self.study


def level_value(level: Mapping[str, Any], metric: str) -> float | None:
    key, sub = METRICS[metric]
    value = level.get(key)
    if sub is not None:
        value = value.get(sub) if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def level_interval(
    level: Mapping[str, Any], metric: str, new_launch: bool = False
) -> tuple[float | None, float | None, int | None]:
    """The study's 95% interval of ``metric`` at a level, or Nones when the record has none. ``new_launch``: the
    interval for one new launch where the level pools several launches (``across_launches``), else the mean's."""
    iv = (level.get("intervals") or {}).get(metric)
    if not isinstance(iv, Mapping):
        return None, None, None
    n = int(iv["n"]) if iv.get("n") is not None else None
    if new_launch and iv.get("new_launch_low") is not None and iv.get("new_launch_high") is not None:
        return float(iv["new_launch_low"]), float(iv["new_launch_high"]), n
    if iv.get("low") is None or iv.get("high") is None:
        return None, None, None
    return float(iv["low"]), float(iv["high"]), n


Spread = Mapping[tuple[int | str, str], tuple[float, int]]  # (level, metric) -> (relative sd, degrees of freedom)


def level_key(level: Mapping[str, Any]) -> int | str:
    """A level summary's key: its concurrency, or an open-loop level's load (``rate8``; its concurrency field is 0)."""
    load = level.get("load")
    return str(load) if load else int(level["concurrency"])


def _in_plan_order(keys: Iterable[int | str]) -> list[int | str]:
    """Concurrencies ascending, then open-loop levels in the order they came."""
    return sorted(keys, key=lambda k: (isinstance(k, str), k if isinstance(k, int) else 0))


def _per_level(launches: Sequence[Sequence[Mapping[str, Any]]]) -> dict[int | str, dict[str, list[float]]]:
    """Per level (``level_key``) and metric, the figures of the launches that measured it (one per launch)."""
    out: dict[int | str, dict[str, list[float]]] = {}
    for levels in launches:
        for lv in levels:
            per = out.setdefault(level_key(lv), {})
            for metric in METRICS:
                if (v := level_value(lv, metric)) is not None:
                    per.setdefault(metric, []).append(v)
    return out


def launch_spread(
    configs: Sequence[Sequence[Sequence[Mapping[str, Any]]]],
) -> dict[tuple[int | str, str], tuple[float, int]]:
    """Launch-to-launch spread per level and metric, pooled over several configs (``pooled_relative_sd``): for each
    config its launches' level summaries (``configs[i][j]`` = launch j of config i, as in ``bench.levels``)."""
    groups: dict[tuple[int | str, str], list[list[float]]] = {}
    for launches in configs:
        for c, per in _per_level(launches).items():
            for metric, values in per.items():
                groups.setdefault((c, metric), []).append(values)
    return {k: p for k, g in groups.items() if (p := pooled_relative_sd(g)) is not None}


def across_launches(
    launches: Sequence[Sequence[Mapping[str, Any]]], spread: Spread | None = None, spread_basis: str = ""
) -> list[dict[str, Any]]:
    """Level summaries of several launches of one config pooled into one: per level and metric, the mean of the
    launches' figures and its 95% interval across launches (``n`` = launches), so launch-to-launch variation counts,
    and the 95% interval for ONE new launch. ``spread`` (``launch_spread`` over this config and others measured the
    same way): where it has more degrees of freedom than these launches alone, the new-launch interval uses it
    (``new_launch_df``, ``new_launch_basis`` = ``spread_basis``).

    ``launches``: each launch's level summaries (as in a record's ``bench.levels``). A level only some launches
    measured is pooled over those."""
    by_level = _per_level(launches)
    out: list[dict[str, Any]] = []
    for c in _in_plan_order(by_level):
        pooled: dict[str, Any] = {"concurrency": c, "intervals": {}}
        if isinstance(c, str):  # an open-loop level, keyed by its load as a level summary is
            pooled.update(concurrency=0, load=c)
        for metric, (key, sub) in METRICS.items():
            values = by_level[c].get(metric)
            if not values:
                continue
            iv = interval(values)
            if sub is None:
                pooled[key] = iv.mean
            else:
                pooled.setdefault(key, {})[sub] = iv.mean
            shared = (spread or {}).get((c, metric))
            if shared is not None and shared[1] > len(values) - 1:
                new, df, basis = prediction_interval(values, spread=shared), shared[1], spread_basis
            else:
                new, df, basis = prediction_interval(values), len(values) - 1, "this config's launches"
            if new is not None:  # every metric here is >= 0: a normal model's bound below 0 says only "0"
                new = (max(new[0], 0.0), new[1])
            if iv.low is not None or new is not None:
                pooled["intervals"][metric] = {
                    "mean": iv.mean,
                    "sd": iv.sd,
                    "n": iv.n,
                    "low": iv.low,
                    "high": iv.high,
                    "new_launch_low": new[0] if new else None,
                    "new_launch_high": new[1] if new else None,
                    "new_launch_df": df if new else None,
                    "new_launch_basis": basis if new else None,
                }
        out.append(pooled)
    return out


def compare(
    study_levels: Sequence[Mapping[str, Any]],
    measured_levels: Sequence[Mapping[str, Any]],
    *,
    judged: Sequence[str] = JUDGED_DEFAULT,
    tolerance: float = 0.10,
    new_launch: bool = False,
    machine_variation: float | None = MACHINE_VARIATION,
) -> tuple[Figure, ...]:
    """Every metric of ``METRICS`` at every level of the study (summaries as in best.json / BenchResult.to_json).

    ``new_launch``: the study's levels pool several launches and the measurement is one new launch, so it is judged
    against the interval for a new launch (prediction interval), not the interval of the launches' mean.
    ``machine_variation``: a figure outside the interval by more than this share of the study's figure is "beyond
    machine variation" (None: not told apart)."""
    unknown = [m for m in judged if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}: use {', '.join(METRICS)}")
    measured = {level_key(lv): lv for lv in measured_levels}
    out: list[Figure] = []
    study_by_key = {level_key(lv): lv for lv in study_levels}
    for c in _in_plan_order(study_by_key):
        lv = study_by_key[c]
        for metric in METRICS:
            study = level_value(lv, metric)
            if study is None and metric not in judged:
                continue  # a figure the study did not record (goodput without SLOs) and no one asked for
            low, high, n = level_interval(lv, metric, new_launch)
            again = level_value(measured[c], metric) if c in measured else None
            m_low, m_high, _ = level_interval(measured[c], metric) if c in measured else (None, None, None)
            verdict = _verdict(study, (low, high), again, (m_low, m_high), tolerance, machine_variation)
            out.append(Figure(c, metric, study, low, high, n, again, m_low, m_high, metric in judged, verdict))
    return tuple(out)


Bounds = tuple[float | None, float | None]


def _verdict(
    study: float | None,
    interval: Bounds,
    measured: float | None,
    again: Bounds,
    tolerance: float,
    machine_variation: float | None = None,
) -> Verdict:
    """Within the study's interval; else, when verify has an interval of its own (its windows) that overlaps the
    study's, "intervals overlap" (reported, not a pass); else outside, and "beyond machine variation" when it is
    outside by more than ``machine_variation`` of the study's figure. Without a study interval: within ``tolerance``
    of the study's figure."""
    if measured is None or study is None:
        return "not measured"
    low, high = interval
    if low is not None and high is not None:
        if low <= measured <= high:
            return "within interval"
        m_low, m_high = again
        if m_low is not None and m_high is not None and m_low <= high and low <= m_high:
            return "intervals overlap"
        gap = low - measured if measured < low else measured - high
        if machine_variation is not None and gap > machine_variation * abs(study):
            return "beyond machine variation"
        return "outside interval"
    return "within tolerance" if abs(measured - study) <= tolerance * abs(study) else "outside tolerance"


def bench_serving_levels(levels: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """bench_serving's results in the shape of a level summary, for ``compare``."""
    return [
        {
            "concurrency": r["concurrency"],
            "output_tok_per_s": r["output_tok_per_s"],
            "ttft_ms": {"p99": r["ttft_ms_p99"], "median": r["ttft_ms_median"]},
            "tpot_ms": {"median": r["tpot_ms_median"]},
        }
        for r in levels
    ]


def client_offsets(
    autotune_levels: Sequence[Mapping[str, Any]],
    other_levels: Sequence[Mapping[str, Any]],
    metrics: Sequence[str] = ("output_tok_per_s", "tpot_ms.median"),
) -> list[dict[str, Any]]:
    """Another client's figures (``bench_serving_levels``) against autotune's client on the same launch, per level:
    ``other / autotune - 1`` per metric (None where either lacks the figure). The two clients differ by this much on
    one server; a study interval narrower than it cannot be met by both."""
    mine = {int(lv["concurrency"]): lv for lv in autotune_levels}
    out: list[dict[str, Any]] = []
    for other in other_levels:
        lv = mine.get(int(other["concurrency"]))
        if lv is None:
            continue
        row: dict[str, Any] = {"concurrency": int(other["concurrency"])}
        for m in metrics:
            a, b = level_value(other, m), level_value(lv, m)
            row[m] = a / b - 1.0 if a is not None and b else None
        out.append(row)
    return out
