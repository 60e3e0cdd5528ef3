"""The study's last step: export what it stored (``autotune.export``: ``best/`` and the HTML report), name the export in
the Optuna study for optuna-dashboard, and say the result on the console: the summary table, the verdict with its
intervals, the best config and where its files are. The driver runs it at the end of every run, also of one cut short
(with the banner as the export's note)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from autotune.export import export_study, format_summary_table
from autotune.export.estimates import write_estimates
from autotune.export.verdict import fmt_gain
from autotune.finalists.choice import study_outcome
from autotune.finalists.outcome import FinalistOutcome
from autotune.finalists.store import FinalistStore
from autotune.progress.console import Console
from autotune.report.render import write_html
from autotune.space import StudySpec
from autotune.study.model_rank import ModelRank
from autotune.study.nodes import node_events
from autotune.trial.records import TrialRecord
from autotune.trial.store import StudyStore


def _gain_text(d: Any) -> str:
    return fmt_gain(d) + ("" if d.separable else ", a tie")


def finalist_outcome(spec: StudySpec, records: list[TrialRecord], finalist_store: FinalistStore) -> FinalistOutcome:
    """What the finalist stage decided, from its store (``autotune.finalists.choice.study_outcome``)."""
    first = spec.objectives[0]
    return study_outcome(
        records,
        finalist_store.plans(),
        finalist_store.load(),
        objective=first,
        alpha=spec.finalists.alpha,
        count=spec.finalists.count,
        baseline=spec.baseline,
    )


def _mark_dashboard(study: Any, result: Any, say: Callable[[str], None]) -> None:
    """Name the exported config in the Optuna study, for optuna-dashboard (autotune.core.dashboard_attrs.mark_export)."""
    if study is None:
        return
    from autotune.core.dashboard_attrs import mark_export

    verdict = result.verdict.headline if result.verdict is not None else result.reason
    best = result.best.number if result.best is not None else None
    try:
        mark_export(study, best, verdict, result.decided_by, study.find_trial(best))
    except Exception as exc:  # noqa: BLE001 - the export is written; the dashboard note is a convenience
        say(f"could not mark the export in the Optuna study ({type(exc).__name__}: {exc})")


def export_and_say(
    spec: StudySpec,
    store: StudyStore,
    finalist_store: FinalistStore,
    console: Console,
    *,
    study: Any,
    note: str = "",
    stopped_early: str = "",
) -> int:
    """Export the study and say its result. ``study``: the Optuna study (None: not marked); ``note``: a banner for the
    export (the time box, an interrupt; the study's infrastructure events are added); ``stopped_early``: why
    ``study.stop_when`` ended the search. Returns the exit code: 0, or 3 when no trial is feasible."""
    records = store.load()
    objectives = spec.objectives
    levels = list(spec.plan.concurrencies)
    outcome = finalist_outcome(spec, records, finalist_store)
    estimates = ModelRank(spec).estimates(records)
    write_estimates(store.root, estimates, records)
    events = node_events(store.root)
    if events:
        infra = "Infrastructure events (not results of any configuration): " + "; ".join(events) + "."
        note = f"{note} {infra}" if note else infra
    result = export_study(
        store.root,
        study_name=spec.name,
        objectives=objectives,
        records=records,
        load_levels=levels,
        study_only=spec.server.study_only,
        finalists=outcome,
        note=note,
        stopped_early=stopped_early,
        baseline=spec.baseline,
        http=spec.export_http,
        estimates=estimates,
    )
    html = write_html(result, title=f"autotune study {spec.name}")
    _mark_dashboard(study, result, console.say)
    say = console.result
    say("")
    say(format_summary_table(records, objectives, levels, finalists=outcome, estimates=estimates).rstrip("\n"))
    if stopped_early:
        say(f"\n{stopped_early}")
    best = result.best
    if best is None:
        say(f"\nno feasible trial in {len(records)}; see {store.root / 'best' / 'report.md'}")
        say(f"report: {html.resolve().as_uri()}")
        return 3
    engine = best.engine
    label = (
        "SIMULATED, not a measurement"
        if engine is None or engine.simulated
        else f"measured on {engine.gpu_count}x {engine.gpu_name}, sglang {engine.version}"
    )
    if result.verdict is not None:
        say(f"\nverdict: {result.verdict.headline}")
        for g in result.verdict.gains:
            if g.difference is not None:
                say(
                    f"  concurrency {g.concurrency:>4}: {g.metric} {g.baseline_mean:,.1f} -> "
                    f"{g.recommended_mean:,.1f} ({_gain_text(g.difference)})"
                )
        sp = result.spread
        if sp is not None:
            say(
                f"  vs the worst config (trial {sp.worst}) at concurrency {sp.concurrency}: {sp.worst_mean:,.1f} -> "
                f"{sp.best_mean:,.1f} ({_gain_text(sp.difference)})"
            )
        say("  (intervals: relaunches on this machine; another machine or day adds its own variation)")
    say(f"\nbest: trial {best.number} [{best.trial_id}] ({label})")
    say(f"  decided by: {result.decided_by}: {result.reason}")
    for k, v in best.objectives.items():
        say(f"  {k} = {v:,.2f}")
    say(f"  params: {json.dumps(best.params, default=str)}")
    say(f"  command: {' '.join(best.argv)}")
    say(f"exported to {store.root / 'best'} (launch.sh, serve_config.yaml, best.json, report.md)")
    say(f"report: {html.resolve().as_uri()} (one self-contained page)")
    if result.rehearsal_script is not None:
        say(
            "  tuned on the simulator: launch.sh is the SGLang command it stands for; rehearse_sim.sh runs the "
            "simulator as measured"
        )
    return 0
