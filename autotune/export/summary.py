"""The fixed-width table printed in the terminal at the end of a study."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autotune.export.accessors import compact_params, fmt, fmt_pm, objective_interval, outcome_label
from autotune.export.analysis import analyze
from autotune.export.best import objective_value
from autotune.finalists.outcome import FinalistOutcome
from autotune.space import Objective
from autotune.trial.records import TrialOutcome, TrialRecord


def format_summary_table(
    records: Sequence[TrialRecord],
    objectives: Sequence[Objective],
    load_levels: Sequence[int],
    finalists: FinalistOutcome | None = None,
    estimates: Mapping[int, float] | None = None,
) -> str:
    """Engine line, one row per trial (trial, outcome, objectives, feasible, params), the best marked with '*'.

    The params come last and are never cut (a speculative trial's draft model path and step counts are what tell two
    trials apart)."""
    a = analyze(
        study_name="",
        objectives=objectives,
        records=records,
        load_levels=load_levels,
        finalists=finalists,
        estimates=estimates,
    )
    best = a.best.record.number if a.best.record is not None else None
    header = ["", "trial", "outcome", *(o.key for o in a.objectives), "feasible", "params"]
    rows = []
    for rec in a.records:
        feasible = "yes" if rec.feasible else ("no" if rec.outcome is TrialOutcome.COMPLETE else "-")
        values = [fmt_pm(objective_value(rec, o), objective_interval(rec, o), 2) for o in a.objectives]
        rows.append(
            [
                "*" if rec.number == best else "",
                str(rec.number),
                outcome_label(rec),
                *values,
                feasible,
                compact_params(rec.params, shorten_paths=False),
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    numeric = {1, *range(3, 3 + len(a.objectives))}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    out = [a.banner, line(header).rstrip(), "  ".join("-" * w for w in widths)]
    out += [line(r).rstrip() for r in rows]
    if a.best.record is not None:
        primary = a.objectives[0]
        how = {"single_launch": "", "model_estimate": "; the best estimate of a model of the launches"}.get(
            a.best.method, f"; decided by the finalist stage: {a.best.method}"
        )
        out.append(f"* best: trial {best} ({primary.key} = {fmt(a.best.value, 2)}, {primary.direction}{how})")
    else:
        out.append(f"no best trial: {a.best.reason}")
    if any(objective_interval(rec, o) is not None for rec in a.records for o in a.objectives):
        out.append("±: half-width of the 95% interval over a level's measurement windows, relative to the mean")
    return "\n".join(out) + "\n"
