"""Everything the exported files say, computed once from the records: one typed value, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.export.banner import study_banner
from autotune.export.best import BestChoice, apply_finalists, check_objectives, parse_load_levels, select_best
from autotune.export.evidence import Evidence, level_of
from autotune.export.health import CapNote, DrafterIssue, cap_notes, drafter_issues
from autotune.export.output_gate import GateResult, output_gate
from autotune.export.pareto import ParetoFront, pareto_front
from autotune.export.regimes import Crossover, RegimeChoice, crossover, open_level_keys, regime_choices
from autotune.export.schedule import Schedule, speculation_schedule
from autotune.export.verdict import BaselineVerdict, Spread, baseline_verdict, spread
from autotune.finalists.outcome import FinalistOutcome, baseline_number
from autotune.space import Objective
from autotune.trial.records import TrialRecord


@dataclass(frozen=True)
class StudyAnalysis:
    study_name: str
    objectives: tuple[Objective, ...]
    load_levels: tuple[int, ...]  # ascending
    records: tuple[TrialRecord, ...]  # by trial number
    banner: str
    best: BestChoice
    pareto: ParetoFront
    regimes: tuple[RegimeChoice, ...]
    crossover: Crossover
    drafter_issues: tuple[DrafterIssue, ...]
    cap_notes: tuple[CapNote, ...]
    finalists: FinalistOutcome | None = None
    stopped_early: str = ""  # why the stopping rule (study.stop_when) ended the search, if it did
    verdict: BaselineVerdict | None = None  # the recommendation against the user's current configuration
    evidence: Evidence | None = None  # what every comparison of the report rests on
    spread: Spread | None = None  # the recommendation against the worst complete config: what tuning is worth
    gate: GateResult | None = None  # the output-equality gate of the recommended configuration (None: no best)
    gated_out: tuple[GateResult, ...] = ()  # speculative configurations it failed, best first
    schedule: Schedule | None = None  # the best speculative setting per load level

    @property
    def peak_level(self) -> int:
        return self.load_levels[-1]


def analyze(
    *,
    study_name: str,
    objectives: Sequence[Objective],
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    finalists: FinalistOutcome | None = None,
    stopped_early: str = "",
    baseline: Mapping[str, Any] | None = None,
    estimates: Mapping[int, float] | None = None,
    study_only: Mapping[str, str] | None = None,
) -> StudyAnalysis:
    """Validate the inputs (ExportError says how to fix them) and compute every section of the export.

    ``finalists``: the finalist stage's outcome; where it decided a winner, that trial is the best. ``baseline``: the
    study's baseline point (``StudySpec.baseline``); the verdict judges the best against the trial that measured it.
    ``estimates``: a model's estimate of the primary objective per trial number (``autotune.study.model_rank``);
    where no finalist stage decided, the best is the trial with the best estimate (``select_best``).
    ``study_only``: the study's benchmark-only settings, left out of the speculation schedule's flags.
    Every comparison (best, regimes, speculation on vs off, the verdict) uses one ``Evidence``."""
    objs = check_objectives(objectives)
    levels = parse_load_levels(load_levels)
    recs = tuple(sorted(records, key=lambda r: r.number))
    ev = Evidence(recs, finalists)
    best, gate, gated_out = gated_best(
        apply_finalists(select_best(recs, objs, estimates), recs, finalists), recs, objs, estimates
    )
    failed_gate = {r.number for r in recs if output_gate(r, recs).blocks}
    base = baseline_number(recs, baseline) if baseline is not None else (finalists.baseline if finalists else None)
    at = level_of(objs[0], levels)
    winner = (
        (best.record.number, at)
        if best.record is not None and at is not None and objs[0].metric == "output_tok_per_s"
        else None
    )
    return StudyAnalysis(
        study_name=study_name,
        objectives=objs,
        load_levels=levels,
        records=recs,
        banner=study_banner(recs),
        best=best,
        pareto=pareto_front(recs, levels, objs),
        regimes=regime_choices(recs, levels, ev, winner, open_level_keys(recs)),
        crossover=crossover(recs, levels, ev, winner),
        drafter_issues=drafter_issues(recs),
        cap_notes=cap_notes(recs, levels),
        finalists=finalists,
        stopped_early=stopped_early,
        verdict=baseline_verdict(recs, best, base, ev, objs[0], levels, named=baseline is not None),
        evidence=ev,
        spread=spread(recs, best, ev, objs[0], levels),
        gate=gate,
        gated_out=gated_out,
        schedule=speculation_schedule(recs, levels, blocked=failed_gate, evidence=ev, study_only=study_only),
    )


def gated_best(
    choice: BestChoice,
    records: Sequence[TrialRecord],
    objectives: Sequence[Objective],
    estimates: Mapping[int, float] | None = None,
) -> tuple[BestChoice, GateResult | None, tuple[GateResult, ...]]:
    """The best choice after the output-equality gate: a speculative winner whose greedy outputs differ from the
    non-speculative server's is never the recommendation; the next best trial the gate does not block is, and the
    reason says why. Returns the choice, its gate verdict and the verdicts of the winners it set aside."""
    if choice.record is None:
        return choice, None, ()
    gate = output_gate(choice.record, records)
    failed: list[GateResult] = []
    left = list(records)
    while gate.blocks:
        failed.append(gate)
        left = [r for r in left if r.number != gate.candidate]
        nxt = select_best(left, objectives, estimates)
        if nxt.record is None:
            why = "; ".join(g.summary() for g in failed)
            return (
                BestChoice(
                    None,
                    choice.objective,
                    None,
                    f"no configuration passes the output-equality gate: {why}",
                    choice.method,
                ),
                None,
                tuple(failed),
            )
        choice = BestChoice(
            nxt.record,
            nxt.objective,
            nxt.value,
            f"{nxt.reason}, after the output-equality gate set aside trial(s) "
            f"{', '.join(str(g.candidate) for g in failed)} (their greedy outputs differ from the "
            "non-speculative server's)",
            "output_gate",
        )
        gate = output_gate(nxt.record, records)
    return choice, gate, tuple(failed)
