"""optuna-dashboard, through its own API, shows each trial's constraints (so infeasible trials are marked) and the
objective's name; Optuna's own view of the constraints is unchanged by the extra attributes."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any
from wsgiref.util import setup_testing_defaults

import optuna
import pytest

from autotune.space import load_study
from autotune.study.optuna_study import LAUNCH_CONSTRAINT, open_study
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord
from autotune.trial.store import StudyStore

optuna_dashboard = pytest.importorskip(
    "optuna_dashboard", reason="optuna-dashboard is a dev dependency: pip install -e '.[dev]'"
)

ROOT = Path(__file__).resolve().parents[2]
KEY = "output_tok_per_s@max"


def _record(spec, number: int, trial_id: str, params: dict, kind: str) -> TrialRecord:  # type: ignore[no-untyped-def]
    ok = kind != "failed"
    return TrialRecord(
        study=spec.name,
        trial_id=trial_id,
        number=number,
        params=params,
        flags={},
        env={},
        argv=[],
        outcome=TrialOutcome.COMPLETE if ok else TrialOutcome.FAILED,
        failure=None if ok else FailureKind.OOM_AT_LAUNCH,
        objectives={KEY: 1000.0 + number} if ok else {KEY: 0.0},
        # "slow": completed, but its TTFT p99 is 500 ms over the study's limit
        constraints={"ttft_ms.p99@max": 500.0 if kind == "slow" else -10.0, "itl_ms.p99@max": -1.0} if ok else {},
        feasible=kind == "ok",
    )


def _get(app: Any, path: str) -> dict[str, Any]:
    environ: dict[str, Any] = {"PATH_INFO": path, "REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO()}
    setup_testing_defaults(environ)
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, *a: status.append(s)))
    assert status[0].startswith("200"), (status, body[:500])
    return json.loads(body)


def test_dashboard_api_shows_feasibility_and_objective_name(tmp_path: Path) -> None:
    spec = load_study(ROOT / "search_spaces" / "smoke.yaml")
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    searcher = OptunaStudySearcher(
        spec,
        study,
        budget=3,
        on_record=lambda r, log: store.append(r, log),
        make_missing_record=lambda n, tid, p, why: _record(spec, n, tid, p, "failed"),
    )
    kinds = {"a": "ok", "b": "slow", "c": "failed"}
    for tid, kind in kinds.items():
        cfg = searcher.suggest(tid)
        rec = _record(spec, cfg["number"], tid, cfg["params"], kind)
        searcher.on_trial_complete(tid, searcher.inbox.report(tid, rec.to_json()))

    app = optuna_dashboard.wsgi(store.db_url)
    summaries = _get(app, "/api/studies")["study_summaries"]
    study_id = next(s["study_id"] for s in summaries if s["study_name"] == spec.name)
    detail = _get(app, f"/api/studies/{study_id}")
    assert detail["objective_names"] == [KEY]
    launched = [t for t in detail["trials"] if not any(a["key"] == "skipped" for a in t["user_attrs"])]
    trials = {next(a["value"] for a in t["user_attrs"] if a["key"] == "trial_id"): t for t in launched}
    assert set(trials) == set(kinds)
    names = [LAUNCH_CONSTRAINT, "failed_requests", "ttft_ms.p99@max", "itl_ms.p99@max"]
    for tid, kind in kinds.items():
        t = trials[tid]
        attrs = {a["key"]: a["value"] for a in t["user_attrs"]}
        assert json.loads(attrs["constraint_names"]) == names
        assert len(t["constraints"]) == len(names), t
        feasible = all(v <= 0 for v in t["constraints"])  # the dashboard's rule
        assert feasible == (kind == "ok"), (tid, t["constraints"])
        assert attrs["feasible"] == str(kind == "ok")
    assert trials["b"]["constraints"][2] == 500.0 and trials["c"]["constraints"][0] == 1.0

    # Optuna's samplers read the same feasibility through the trial's constraints
    for t in optuna.load_study(study_name=spec.name, storage=store.db_url).trials:
        if "skipped" in t.user_attrs:  # a proposal set aside without a launch (FAIL, ignored by the samplers)
            continue
        by_name = {k: v for k, v in t.constraints.items() if not k.isdigit()}
        assert set(by_name) == set(names)
        assert t.system_attrs["constraints"] == [by_name[n] for n in names]  # the dashboard's list, same values


def test_a_repeated_point_shows_which_trial_it_repeats(tmp_path: Path) -> None:
    """A point already measured is not launched again nor told again: the dashboard shows a FAIL trial that says so."""
    spec = replace(
        load_study(ROOT / "search_spaces" / "smoke.yaml"),
        params=load_study(ROOT / "search_spaces" / "smoke.yaml").params[:1],
        points_to_evaluate=(),
    )
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    study.enqueue_trial({"mem_fraction_static": 0.8})
    study.enqueue_trial({"mem_fraction_static": 0.8})
    searcher = OptunaStudySearcher(
        spec,
        study,
        budget=2,
        on_record=lambda r, log: store.append(r, log),
        make_missing_record=lambda n, tid, p, why: _record(spec, n, tid, p, "failed"),
    )
    cfg = searcher.suggest("a")
    searcher.on_trial_complete(
        "a", searcher.inbox.report("a", _record(spec, cfg["number"], "a", cfg["params"], "slow").to_json())
    )
    second = searcher.suggest("b")  # the same point again: set aside, then a new point is asked
    assert second["params"] != cfg["params"]
    repeats = [t for t in study.trials if "duplicate_of" in t.user_attrs]
    assert repeats, "the enqueued repeat was launched again"
    for t in repeats:
        assert t.state == optuna.trial.TrialState.FAIL and t.user_attrs["duplicate_of"] == cfg["number"]
        assert t.user_attrs["skipped"].startswith("repeats trial")


def test_the_export_is_named_in_the_study_for_the_dashboard() -> None:
    import optuna
    from optuna_dashboard import get_note

    from autotune.core.dashboard_attrs import mark_export

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(direction="maximize", storage=storage)
    for value in (10.0, 12.0, 12.0):  # the dashboard's best is one of the 12s; autotune exports trial 1
        t = study.ask()
        study.tell(t, value)
    skipped = study.ask()
    skipped.set_user_attr("skipped", "repeats a measured point")
    study.tell(skipped, state=optuna.trial.TrialState.FAIL)
    study_id = storage.get_study_id_from_name(study.study_name)
    exported = optuna.trial.Trial(study, storage.get_trial_id_from_study_id_trial_number(study_id, 1))
    mark_export(
        study, 1, "Recommended: trial 1. It beats your current configuration (trial 0) by +20%.", "tie", exported
    )
    assert study.user_attrs["autotune_best_trial"] == 1
    note = get_note(study)
    assert "trial 1" in note and "1 FAIL trial(s) carry the user attribute `skipped`" in note
    assert "exported config" in get_note(exported)
