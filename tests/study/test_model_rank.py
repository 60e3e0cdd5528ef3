"""The export's ranking by the model's estimate (autotune/study/model_rank.py, autotune/export/best.py,
autotune/export/estimates.py): repeats and neighbours outweigh one lucky draw, only measured-feasible launches are
ranked, the model's reason is said, and a report rendered again exports the same best."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from autotune.export import export_study
from autotune.export.best import select_best
from autotune.export.estimates import read_estimates, write_estimates
from autotune.space import Objective, load_study
from autotune.space.enumerate import finite_points
from autotune.space.types import StudySpec
from autotune.study.model_rank import ModelRank
from autotune.trial.records import FailureKind, Launched, TrialOutcome, TrialRecord

ROOT = Path(__file__).resolve().parents[2]
KEY = "output_tok_per_s@max"


@pytest.fixture
def spec() -> StudySpec:
    return load_study(ROOT / "search_spaces" / "nccl.yaml")


ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "8", "--port", "31000"]


def record(spec: StudySpec, number: int, params: dict[str, Any], value: float | None) -> TrialRecord:
    return TrialRecord(
        study=spec.name,
        trial_id=f"t{number}",
        number=number,
        params=params,
        flags={},
        env={},
        argv=ARGV,
        launch=Launched.from_argv("sglang", ARGV),
        outcome=TrialOutcome.COMPLETE if value is not None else TrialOutcome.FAILED,
        failure=None if value is not None else FailureKind.OOM_AT_LAUNCH,
        objectives={KEY: value} if value is not None else {},
        constraints={"ttft_ms.p99@max": -10.0, "itl_ms.p99@max": -1.0} if value is not None else {},
        feasible=value is not None,
    )


def lucky_study(spec: StudySpec) -> list[TrialRecord]:
    """Config A measured 100, 101, 99, 100; config B 97, 96, 98 and one lucky 104; lesser configs around them and a
    failed launch: the best single launch is B's lucky one."""
    points = finite_points(spec, 1000) or []
    a, b = points[10], points[250]
    plan: list[tuple[dict[str, Any], float | None]] = [(a, v) for v in (100.0, 101.0, 99.0, 100.0)]
    plan += [(b, v) for v in (97.0, 96.0, 98.0, 104.0)]
    plan += [(p, 80.0 + 2 * i) for i, p in enumerate(points[40:400:60])]
    plan.append((points[470], None))
    return [record(spec, n, dict(p), v) for n, (p, v) in enumerate(plan)]


def test_repeats_outweigh_one_lucky_draw(spec: StudySpec) -> None:
    records = lucky_study(spec)
    measured = select_best(records, spec.objectives)
    assert measured.record is not None and measured.record.number == 7 and measured.method == "single_launch"
    estimates = ModelRank(spec).estimates(records)
    assert set(estimates) == {r.number for r in records if r.feasible}
    choice = select_best(records, spec.objectives, estimates)
    assert choice.record is not None and choice.record.params == records[0].params
    assert choice.method == "model_estimate" and choice.value == records[choice.record.number].objectives[KEY]
    assert "the best single launch, trial 7, 104.0" in choice.reason
    assert ModelRank(spec).estimates(records) == estimates  # the same records, the same estimates


def test_only_measured_feasible_launches_are_ranked(spec: StudySpec) -> None:
    records = lucky_study(spec)
    lucky = replace(records[-2], objectives={KEY: 500.0}, feasible=False, constraints={"ttft_ms.p99@max": 5.0})
    records[-2] = lucky
    estimates = ModelRank(spec).estimates(records)
    assert lucky.number not in estimates
    choice = select_best(records, spec.objectives, estimates)
    assert choice.record is not None and choice.record.feasible


def test_no_model_below_two_launches_ranks_by_measurement(spec: StudySpec) -> None:
    one = lucky_study(spec)[:1]
    assert ModelRank(spec).estimates(one) == {}
    assert select_best(one, spec.objectives, {}).method == "single_launch"


def test_a_rendered_report_exports_the_same_best(spec: StudySpec, tmp_path: Path) -> None:
    """The study's export ranks by the estimates and stores them; ``python -m autotune.report`` reads them back for
    the same trials, and not once the study has more."""
    records = lucky_study(spec)
    estimates = ModelRank(spec).estimates(records)
    write_estimates(tmp_path, estimates, records)
    assert read_estimates(tmp_path, records) == estimates
    assert read_estimates(tmp_path, records[:-1]) is None
    out = export_study(
        tmp_path, study_name="s", objectives=spec.objectives, records=records, load_levels=[1], estimates=estimates
    )
    assert out.best is not None and out.best.number == 0 and out.decided_by == "model_estimate"
    doc = json.loads(out.best_json.read_text())
    assert doc["decided_by"] == "model_estimate"
    again = export_study(
        tmp_path,
        study_name="s",
        objectives=spec.objectives,
        records=records,
        load_levels=[1],
        estimates=read_estimates(tmp_path, records),
    )
    assert again.best is not None and again.best.number == out.best.number


def test_a_minimized_objective_is_ranked_lowest_first(spec: StudySpec) -> None:
    """The same study with a latency objective (200 - each value): B's one lucky low draw against A's repeats."""
    obj = Objective("ttft_ms.p99", "max", "minimize")
    low = replace(spec, objectives=(obj,))
    records = [
        replace(r, objectives={obj.key: 200.0 - r.objectives[KEY]}) if r.objectives else r for r in lucky_study(spec)
    ]
    assert select_best(records, low.objectives).record.number == 7  # type: ignore[union-attr]
    choice = select_best(records, low.objectives, ModelRank(low).estimates(records))
    assert choice.record is not None and choice.record.params == records[0].params
