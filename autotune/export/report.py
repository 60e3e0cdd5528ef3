"""``report.md``: engine banner, recommendation, per-regime advice, drafter health, Pareto set, trials, failures."""

from __future__ import annotations

from collections.abc import Sequence

from autotune.engines.base import key_error_line
from autotune.export.accessors import (
    accept_lengths,
    compact_params,
    draft_model_path,
    fmt,
    fmt_pm,
    interval,
    is_speculative,
    level_label,
    objective_interval,
    outcome_label,
    speculative_algorithm,
    throughput,
    tpot_median,
    ttft_p99,
)
from autotune.export.analysis import StudyAnalysis
from autotune.export.best import objective_value
from autotune.export.command import ExportedServer
from autotune.export.evidence import describe, level_of, tie_text
from autotune.export.health import BROKEN_ACCEPT_LENGTH, SPEC_DEFAULT_MAX_RUNNING
from autotune.export.regimes import open_level_keys
from autotune.export.schedule import schedule_table
from autotune.export.traffic import traffic_section
from autotune.export.verdict import fmt_gain
from autotune.finalists.outcome import FinalistOutcome
from autotune.trial.records import TrialOutcome, TrialRecord
from autotune.verify.compare import level_key, level_value

INTERVALS_COVER_TEXT = (
    "Every interval in this report is for relaunches on the measured machine (launches of one study, on one machine, "
    "in one period; single launches: their measurement windows). Another machine, node or day adds its own variation, "
    "which these intervals do not include: `python -m autotune.verify` measures the export again and reports it."
)
THROUGHPUT_SVG = "throughput_vs_concurrency.svg"
PARETO_SVG = "pareto.svg"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


def _spec_label(rec: TrialRecord) -> str:
    algorithm = speculative_algorithm(rec)
    return algorithm if algorithm else "off"


def _last_log_line(rec: TrialRecord) -> str:
    """The log line that says why the trial failed (its last error line), for the failures section."""
    line = key_error_line(rec.log_tail, max_chars=10_000).replace("`", "'")
    return line if len(line) <= 200 else line[:197] + "..."


def _header(a: StudyAnalysis) -> list[str]:
    recs = a.records
    complete = sum(1 for r in recs if r.outcome is TrialOutcome.COMPLETE)
    failed = sum(1 for r in recs if r.outcome is TrialOutcome.FAILED)
    invalid = sum(1 for r in recs if r.outcome is TrialOutcome.INVALID)
    feasible = sum(1 for r in recs if r.feasible)
    objs = ", ".join(f"`{o.key}` ({o.direction}{', primary' if i == 0 else ''})" for i, o in enumerate(a.objectives))
    opened = open_level_keys(recs)  # rate and trace levels: measured too, and named by their key
    return [
        f"# Study `{a.study_name}`: results",
        "",
        f"> **{a.banner}**",
        "",
        f"Trials: {len(recs)} ({complete} complete, {feasible} feasible; {failed} failed; {invalid} invalid). "
        f"Objectives: {objs}. Load levels (concurrency): {', '.join(map(str, a.load_levels))}"
        + (f"; open loop: {', '.join(opened)}." if opened else "."),
        "",
        *([f"**Stopped early.** {a.stopped_early}.", ""] if a.stopped_early else []),
    ]


def _verdict(a: StudyAnalysis) -> list[str]:
    """The answer first: the recommended config against the user's current one (the study's baseline)."""
    v = a.verdict
    if v is None:
        return []
    out = ["## Your configuration vs the recommendation", "", f"**{v.headline}**", ""]
    if v.gains:
        rows = []
        for g in v.gains:
            d = g.difference
            rows.append(
                [
                    g.concurrency,
                    fmt(g.baseline_mean, 1, thousands=True) + f" (n={g.baseline_launches})",
                    fmt(g.recommended_mean, 1, thousands=True) + f" (n={g.recommended_launches})",
                    fmt_gain(d),
                    ("yes" if d.separable else "tie") if d is not None else "-",
                    describe(d.basis) if d is not None else "-",
                ]
            )
        metric = v.gains[0].metric
        out += _table(
            [
                "concurrency",
                f"baseline (trial {v.baseline}) {metric}",
                f"recommended (trial {v.recommended}) {metric}",
                "gain [95% interval]",
                "beyond the noise",
                "basis",
            ],
            rows,
        )
        out += ["", f"n = launches behind each mean. {INTERVALS_COVER_TEXT}", ""]
    sp = a.spread
    if sp is not None:
        out += [
            f"What tuning is worth here: the recommendation against the worst complete config (trial {sp.worst}) "
            f"at concurrency {sp.concurrency}: {fmt(sp.worst_mean, 1, thousands=True)} -> "
            f"{fmt(sp.best_mean, 1, thousands=True)} {sp.metric}, {fmt_gain(sp.difference)}"
            + ("" if sp.difference.separable else " (a tie)")
            + ".",
            "",
        ]
    return out


def _recommendation(a: StudyAnalysis) -> list[str]:
    out = ["## Recommendation", ""]
    rec = a.best.record
    if rec is None:
        return out + [f"**No feasible trial.** {a.best.reason}", ""]
    return out + [
        f"**Best: trial {rec.number}** (`{rec.trial_id}`): `{a.best.objective.key}` = "
        f"{fmt_pm(a.best.value, objective_interval(rec, a.best.objective), 2, thousands=True)}"
        f" ({a.best.reason}). Speculation: {_spec_label(rec)}.",
        "",
        f"Params: {_cell(compact_params(rec.params, shorten_paths=False))}",
        "",
        "Run it: `bash launch.sh --dry-run` prints the SGLang command and environment; `./launch.sh` starts it. "
        "On a Ray cluster: `serve deploy serve_config.yaml`. Details in `best.json`.",
        "",
    ]


def _finalists(a: StudyAnalysis) -> list[str]:
    out = ["## How the winner was decided", ""]
    outcome = a.finalists
    if outcome is None or outcome.decision is None:
        note = outcome.note if outcome is not None else "no finalist stage"
        how = (
            "By the best estimate of a model of the study's launches, which weighs each launch with its neighbours "
            "and repeats"
            if a.best.method == "model_estimate"
            else "By the best trial's single launch"
        )
        return out + [f"{how} (`{a.best.method}`): {note}.", ""]
    d = outcome.decision
    out += [
        f"**{d.method}**: {d.summary}.",
        "",
        f"Trials {', '.join(map(str, outcome.finalists))} (the top feasible configs"
        + (f" and the baseline, trial {outcome.baseline}" if outcome.baseline in outcome.finalists else "")
        + ") were relaunched in interleaved order "
        f"({outcome.launches} relaunches over stage(s) {', '.join(map(str, d.stages))}); each clean relaunch "
        f"(complete and feasible) is one observation of `{d.objective_key}`, so launch-to-launch variation counts. "
        f"Separable means Welch's t test between the leader and a finalist gives p < {d.alpha:g}; finalists that are "
        "not separable from the leader tie; a tie goes to lower TTFT p99 where that is separable, else to the leader "
        "(the best relaunch mean); lower `--mem-fraction-static`, then the lower trial number, break only equal means.",
        "",
    ]
    comp = {c.number: c for c in d.comparisons}
    lead_n = next((len(s.values) for s in d.stats if s.number == d.leader), 0)
    rows = []
    for s in sorted(
        d.stats, key=lambda s: (s.mean is None, -(s.mean or 0) if d.direction == "maximize" else (s.mean or 0))
    ):
        c = comp.get(s.number)
        iv = s.objective
        rows.append(
            [
                f"**{s.number}**" if s.number == d.winner else s.number,
                compact_params(s.params),
                f"{len(s.values)}/{s.launches}",
                fmt_pm(s.mean, iv, 2, thousands=True),
                ", ".join(fmt(v, 1, thousands=True) for v in s.values) or "-",
                fmt(sum(s.ttft_p99) / len(s.ttft_p99)) if s.ttft_p99 else "-",
                fmt(s.mem_fraction, 2) if s.mem_fraction is not None else "-",
                "leader" if s.number == d.leader else (f"{c.diff_pct:+.1f}%" if c else "not ranked: unclean relaunch"),
                _welch_p(c.p_value, min(lead_n, len(s.values))) if c else "-",
            ]
        )
    header = [
        "trial",
        "params",
        "clean/launches",
        f"{d.objective_key} (mean ±95%)",
        "per launch",
        "TTFT p99 (ms)",
        "mem-fraction-static",
        "leader better by",
        "Welch p",
    ]
    out += _table(header, rows)
    if len(outcome.per_stage) > 1:
        out += ["", "Each stage alone (a repeat of the stage should give the same winner or the same tie):", ""]
        out += [
            f"- stage {ds.stages[0] if ds.stages else '?'}: {ds.method}, winner {ds.winner}: {ds.summary}"
            for ds in outcome.per_stage
        ]
    return out + ["", *_winner_levels(outcome)]


def _welch_p(p_value: float | None, n: int) -> str:
    """The finalist table's Welch p; without one, why: fewer than 2 clean launches on a side, or launches that repeat
    one figure (no spread: compared by their measurement windows instead)."""
    if p_value is not None:
        return f"{p_value:.3g}"
    return "n<2" if n < 2 else "no spread"


def _winner_levels(outcome: FinalistOutcome) -> list[str]:
    """The exported config at every load level over its clean relaunches: the figures a new launch is judged by."""
    n = outcome.winner_launches
    if not outcome.winner_levels:
        return []
    rows = []
    dfs: set[tuple[int, str]] = set()
    for lv in outcome.winner_levels:
        for iv in (lv.get("intervals") or {}).values():
            if iv.get("new_launch_df") is not None:
                dfs.add((int(iv["new_launch_df"]), str(iv.get("new_launch_basis") or "")))
        ivs = lv.get("intervals") or {}
        rows.append(
            [
                level_label(level_key(lv)),
                *(
                    _across(lv, ivs, m, d)
                    for m, d in (
                        ("output_tok_per_s", 0),
                        ("ttft_ms.p99", 1),
                        ("tpot_ms.median", 2),
                        ("itl_ms.median", 2),
                    )
                ),
            ]
        )
    header = ["load level", "output tok/s", "TTFT p99 (ms)", "TPOT median (ms)", "ITL median (ms)"]
    return [
        f"### The winner at every load level, across its {n} clean relaunch{'es' if n != 1 else ''}",
        "",
        "Each figure is the mean of the relaunches' figures with the 95% Student-t interval of that mean across "
        f"launches (n = {n} launches, t with {max(n - 1, 0)} degrees of freedom; the trial's own launch is left out: "
        "it was selected for being high), then `new launch`: the 95% interval for ONE new launch of this config "
        "(mean ± t·sd·√(1 + 1/n)), which is what `launch.sh` measured again (`python -m autotune.verify`) is judged "
        "against."
        + ("" if n >= 2 else " With fewer than 2 relaunches there is no interval of the mean.")
        + " "
        + INTERVALS_COVER_TEXT,
        *(
            [""] + [f"- `new launch` sd: {basis}, t with {df} degrees of freedom" for df, basis in sorted(dfs)]
            if dfs
            else []
        ),
        "",
        *_table(header, rows),
        "",
    ]


def _across(level: dict, ivs: dict, metric: str, digits: int) -> str:
    value = level_value(level, metric)
    iv = ivs.get(metric)
    if value is None:
        return "-"
    text = fmt(value, digits, thousands=True)
    if not iv or iv.get("low") is None:
        return text
    out = f"{text} {_bounds(iv['low'], iv['high'], value, digits)}"
    if iv.get("new_launch_low") is not None and iv.get("new_launch_high") is not None:
        out += f"; new launch {_bounds(iv['new_launch_low'], iv['new_launch_high'], value, digits)}"
    return out


def _bounds(low: float, high: float, value: float, digits: int) -> str:
    rel = f" (±{50 * (high - low) / abs(value):.0f}%)" if value else ""
    return f"[{fmt(low, digits, thousands=True)} .. {fmt(high, digits, thousands=True)}]{rel}"


def _who_leads(a: StudyAnalysis) -> str:
    """Whether the recommendation leads the table at its objective's level (``analysis``: output tok/s at a
    concurrency only), or the table can name another config there."""
    primary = a.objectives[0]
    if primary.metric == "output_tok_per_s" and level_of(primary, a.load_levels) is not None:
        return (
            "At the primary objective's level the recommendation leads (where it completed that level with no failed "
            "request)."
        )
    return (
        f"The recommendation is chosen by `{primary.key}` ({primary.direction}), which this table does not rank by: "
        "at that level it can name another config."
    )


def _regimes(a: StudyAnalysis) -> list[str]:
    out = [
        "## Per-traffic-regime recommendation",
        "",
        "The best config at each load level by output throughput (the mean over its launches: finalist relaunches "
        "where it has them, else its single launch), among trials that completed that level with no failed request "
        "and meet every study constraint. Configs the noise cannot separate from it are named as a tie (the same test "
        "as every other statement here). " + _who_leads(a),
        "",
    ]
    open_loop = any(isinstance(ch.concurrency, str) for ch in a.regimes)
    if open_loop:
        out[-1:] = [
            " At a request-rate or trace level (open loop: every config is offered the same traffic) the best is the "
            "one with the highest goodput (requests/s meeting every SLO of the study).",
            "",
        ]
    rows = []
    for ch in a.regimes:
        rec = ch.record
        label = level_label(ch.concurrency)
        if rec is None:
            rows.append(
                [
                    label,
                    "none meets the study's constraints",
                    "-",
                    "-",
                    "-",
                    *(["-"] if open_loop else []),
                    "-",
                    "-",
                    "-",
                ]
            )
            continue
        c = ch.concurrency
        rows.append(
            [
                label,
                f"{tie_text(rec.number, ch.tied)}: {compact_params(rec.params)}",
                fmt(ch.tok_per_s, thousands=True),
                *([fmt(ch.goodput, 2)] if open_loop else []),
                ch.launches,
                fmt(ttft_p99(rec, c)),
                fmt(tpot_median(rec, c), 2),
                _spec_label(rec),
            ]
        )
    header = ["load level" if open_loop else "concurrency", "best config", "output tok/s (mean)"]
    header += ["goodput (req/s)"] if open_loop else []
    header += ["launches", "TTFT p99 (ms)", "TPOT median (ms)", "speculation"]
    out += _table(header, rows)
    out += ["", "### Speculation on vs off", ""]
    rows = []
    for comp in a.crossover.comparisons:
        winner = comp.verdict
        gain = fmt_gain(comp.difference) if comp.difference is not None else "-"
        rows.append(
            [
                comp.concurrency,
                f"#{comp.spec.number} ({_spec_label(comp.spec)})" if comp.spec else "-",
                fmt(comp.spec_tok_per_s, thousands=True),
                f"#{comp.plain.number}" if comp.plain else "-",
                fmt(comp.plain_tok_per_s, thousands=True),
                winner,
                fmt(comp.ratio, 2),
                gain,
            ]
        )
    header = ["concurrency", "best speculative", "tok/s", "best without speculation", "tok/s", "winner"]
    out += _table([*header, "spec / no spec", "spec gain [95% interval]"], rows)
    return out + ["", f"**{a.crossover.summary}**", ""]


def _drafters(a: StudyAnalysis) -> list[str]:
    out = ["## Drafter health", ""]
    spec = [r for r in a.records if is_speculative(r) and accept_lengths(r)]
    if not any(is_speculative(r) for r in a.records):
        return out + ["No speculative trials.", ""]
    for issue in a.drafter_issues:
        out.append(f"- **WARNING: {issue.message}**")
    if not a.drafter_issues:
        out.append(f"No speculative trial reported an accept length <= {BROKEN_ACCEPT_LENGTH}.")
    if spec:
        out.append("")
        rows = []
        for rec in spec:
            levels = rec.bench.levels if rec.bench is not None else ()
            per_level = ", ".join(
                f"{lv.concurrency}: {fmt(lv.accept_length, 2)}" for lv in levels if lv.accept_length is not None
            )
            server = rec.bench.server_accept_length if rec.bench else None
            rows.append([rec.number, _spec_label(rec), draft_model_path(rec) or "-", per_level or "-", fmt(server, 2)])
        out += _table(["trial", "algorithm", "drafter", "accept length by concurrency", "server accept length"], rows)
    out += ["", f"## The {SPEC_DEFAULT_MAX_RUNNING}-request cap", ""]
    out += [f"- {n.message}" for n in a.cap_notes] or [
        "Every speculative trial set `--max-running-requests` explicitly."
    ]
    return out + [""]


def _pareto(a: StudyAnalysis) -> list[str]:
    p = a.pareto
    axes = [f"{ax.label} ({ax.objective.direction})" for ax in p.axes]
    what = (
        f"the study's objectives: {', '.join(axes)}"
        if p.study_objectives
        else f"peak throughput (output tok/s at concurrency {p.axes[1].level}) vs latency "
        f"(TPOT median at concurrency {p.axes[0].level})"
    )
    out = [
        "## Pareto set",
        "",
        f"Feasible trials, {what}. {len(p.front)} on the front, {len(p.dominated)} dominated.",
        "",
        f"![Pareto set]({PARETO_SVG})",
        "",
    ]
    rows = [
        [
            f"#{q.number}",
            *(fmt(v, 2, thousands=True) for v in q.values),
            "yes" if q.speculative else "no",
            compact_params(q.params),
        ]
        for q in p.front
    ]
    header = ["trial", *(f"{ax.objective.metric} @{level_label(ax.level)}" for ax in p.axes), "speculative", "params"]
    out += _table(header, rows)
    return out + ["", "## Throughput vs concurrency", "", f"![Throughput vs concurrency]({THROUGHPUT_SVG})", ""]


def _trials(a: StudyAnalysis) -> list[str]:
    hi = a.peak_level
    best_number = a.best.record.number if a.best.record is not None else None
    header = ["trial", "outcome", "feasible", "key params"]
    header += [f"tok/s @{c}" for c in a.load_levels]
    header += [f"TTFT p99 @{hi} (ms)", f"TPOT median @{hi} (ms)", *(o.key for o in a.objectives)]
    rows = []
    for rec in a.records:
        mark = f"**{rec.number} (best)**" if rec.number == best_number else str(rec.number)
        feasible = "yes" if rec.feasible else ("no" if rec.outcome is TrialOutcome.COMPLETE else "-")
        row: list[object] = [mark, outcome_label(rec), feasible, compact_params(rec.params)]
        row += [fmt_pm(throughput(rec, c), interval(rec, c, "output_tok_per_s"), thousands=True) for c in a.load_levels]
        row += [
            fmt_pm(ttft_p99(rec, hi), interval(rec, hi, "ttft_ms.p99")),
            fmt_pm(tpot_median(rec, hi), interval(rec, hi, "tpot_ms.median"), 2),
            *(fmt_pm(objective_value(rec, o), objective_interval(rec, o), 2) for o in a.objectives),
        ]
        rows.append(row)
    note = (
        "Each figure is the mean over the level's measurement windows; `±x%` is the half-width of its 95% Student-t "
        "interval relative to the mean (no `±`: measured in one window)."
    )
    return ["## All trials", "", note, "", *_table(header, rows), ""]


def _failures(a: StudyAnalysis) -> list[str]:
    groups: dict[str, list[TrialRecord]] = {}
    for rec in a.records:
        if rec.outcome is TrialOutcome.COMPLETE:
            continue
        kind = rec.failure.value if rec.failure is not None else rec.outcome.value
        groups.setdefault(kind, []).append(rec)
    out = ["## Failures", ""]
    if not groups:
        return out + ["None: every trial completed.", ""]
    for kind, recs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out += [f"### {kind} ({len(recs)})", ""]
        for rec in recs:
            line = f"- trial {rec.number}: {_cell(rec.message) or 'no message'}"
            tail = _last_log_line(rec)
            out.append(line + (f" (log: `{tail}`)" if tail else ""))
        out.append("")
    return out


def _study_only(server: ExportedServer | None) -> list[str]:
    if server is None or not server.removed:
        return []
    out = [
        "## Measured with; remove or re-measure on real weights",
        "",
        "These benchmark-only settings were in every measurement above. They are kept in the records and left out of "
        "`launch.sh` and `serve_config.yaml`; figures that depend on them are not production figures.",
        "",
    ]
    out += [f"- `{s.text}`: {_cell(s.reason)}" for s in server.removed]
    return out + [""]


def _tuned_on_simulator(server: ExportedServer | None) -> list[str]:
    if server is None or server.rehearsal is None:
        return []
    return [
        "**Tuned on the simulator.** `launch.sh` and `serve_config.yaml` are the SGLang command this configuration "
        "stands for; every figure here is simulated. `rehearse_sim.sh` (and `rehearse_sim_serve.yaml`) run the "
        "simulator as measured; `python -m autotune.verify <results/study>` measures an export again.",
        "",
    ]


def _output_gate(a: StudyAnalysis) -> list[str]:
    """What the output-equality gate compared and found (autotune.export.output_gate)."""
    if a.gate is None and not a.gated_out:
        return []
    out = ["## Output-equality gate", ""]
    for g in a.gated_out:
        out.append(f"- Set aside: {g.summary()}.")
    if a.gate is not None:
        out.append(f"- Recommended configuration: {a.gate.summary()}.")
    return [*out, ""]


def _speculation_schedule(a: StudyAnalysis) -> list[str]:
    """The best speculative setting per load level (autotune.export.schedule); also best/speculation_schedule.json."""
    s = a.schedule
    if s is None or not any(is_speculative(r) for r in a.records):
        return []
    ranges = "; ".join(
        f"levels {r.low}-{r.high}: "
        + (
            f"trial {r.trial} ({', '.join(f'{k}={v}' for k, v in r.flags.items())})"
            if r.speculative
            else ("off" if r.trial is not None else "no eligible trial")
        )
        for r in s.ranges
    )
    return [
        "## Speculation per load level",
        "",
        *schedule_table(s),
        "",
        f"Schedule: {ranges}. {s.note} Machine-readable: `speculation_schedule.json`.",
        "",
    ]


def render_report(a: StudyAnalysis, server: ExportedServer | None = None) -> str:
    parts = [
        *_header(a),
        *_verdict(a),
        *_tuned_on_simulator(server),
        *_recommendation(a),
        *_study_only(server),
        *_finalists(a),
        *_output_gate(a),
        *_regimes(a),
        *traffic_section(a.records),
        *_speculation_schedule(a),
        *_drafters(a),
        *_pareto(a),
        *_trials(a),
        *_failures(a),
        "## Files",
        "",
        (
            "`launch.sh` (the SGLang command + environment; `--dry-run`), `serve_config.yaml` (`serve deploy`), "
            if a.best.record is not None
            else "No `launch.sh` or `serve_config.yaml`: there is no configuration to recommend. "
        )
        + f"`best.json`, `pareto.json`, `{THROUGHPUT_SVG}`, `{PARETO_SVG}`. Per-trial records are in `../trials.jsonl` "
        "and `../trials/`, server logs in `../logs/`.",
        "",
    ]
    return "\n".join(parts)
