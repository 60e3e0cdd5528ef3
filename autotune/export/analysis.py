"""Everything the exported files say, computed once from the records: one typed value, no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotune.export.banner import study_banner
from autotune.export.best import BestChoice, apply_finalists, parse_load_levels, parse_objectives, select_best
from autotune.export.evidence import Evidence, level_of
from autotune.export.health import CapNote, DrafterIssue, cap_notes, drafter_issues
from autotune.export.pareto import ParetoFront, pareto_front
from autotune.export.regimes import Crossover, RegimeChoice, crossover, open_level_keys, regime_choices
from autotune.export.verdict import BaselineVerdict, Spread, baseline_verdict, spread
from autotune.finalists.choice import FinalistOutcome, baseline_number
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

    @property
    def peak_level(self) -> int:
        return self.load_levels[-1]


def analyze(
    *,
    study_name: str,
    objectives: Sequence[tuple[str, str]],
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    finalists: FinalistOutcome | None = None,
    stopped_early: str = "",
    baseline: Mapping[str, Any] | None = None,
) -> StudyAnalysis:
    """Validate the inputs (ExportError says how to fix them) and compute every section of the export.

    ``finalists``: the finalist stage's outcome; where it decided a winner, that trial is the best. ``baseline``: the
    study's baseline point (``StudySpec.baseline``); the verdict judges the best against the trial that measured it.
    Every comparison (best, regimes, speculation on vs off, the verdict) uses one ``Evidence``."""
    objs = parse_objectives(objectives)
    levels = parse_load_levels(load_levels)
    recs = tuple(sorted(records, key=lambda r: r.number))
    ev = Evidence(recs, finalists)
    best = apply_finalists(select_best(recs, objs), recs, finalists)
    base = baseline_number(recs, baseline) if baseline is not None else (finalists.baseline if finalists else None)
    at = level_of(objs[0].key, levels)
    winner = (best.record.number, at) if best.record is not None and objs[0].metric == "output_tok_per_s" else None
    return StudyAnalysis(
        study_name=study_name,
        objectives=objs,
        load_levels=levels,
        records=recs,
        banner=study_banner(recs),
        best=best,
        pareto=pareto_front(recs, levels),
        regimes=regime_choices(recs, levels, ev, winner, open_level_keys(recs)),
        crossover=crossover(recs, levels, ev, winner),
        drafter_issues=drafter_issues(recs),
        cap_notes=cap_notes(recs, levels),
        finalists=finalists,
        stopped_early=stopped_early,
        verdict=baseline_verdict(recs, best, base, ev, objs[0], levels),
        evidence=ev,
        spread=spread(recs, best, ev, objs[0], levels),
    )
