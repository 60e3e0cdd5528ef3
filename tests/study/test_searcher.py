"""The Tune searcher over an Optuna study, without Ray: ask/tell, durable-first, infeasible failures, resume."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from dataclasses import replace
from pathlib import Path

import optuna
import pytest
from ray.tune.search import Searcher

from autotune.bench.types import LevelSummary
from autotune.policy.base import Rule, Rules, Told
from autotune.policy.defaults import default_rules
from autotune.policy.rejected_flags import always_passed_flags
from autotune.space import load_study
from autotune.study.optuna_study import LAUNCH_CONSTRAINT, open_study, reconcile
from autotune.study.proposer import Proposer
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord
from autotune.trial.store import StudyStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec():  # type: ignore[no-untyped-def]
    return load_study(ROOT / "search_spaces" / "smoke.yaml")


def record_for(spec, number: int, trial_id: str, params: dict, ok: bool) -> TrialRecord:  # type: ignore[no-untyped-def]
    key = "output_tok_per_s@max"
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
        objectives={key: 1000.0 + number} if ok else {key: 0.0},
        constraints={"ttft_ms.p99@max": -10.0, "itl_ms.p99@max": -1.0} if ok else {},
        feasible=ok,
    )


def test_records_before_telling_and_failures_are_infeasible(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    order: list[str] = []

    def on_record(r: TrialRecord, log: str) -> None:
        # durable first: the optuna trial is still running when the record is written
        assert study.trials[r.number].state == optuna.trial.TrialState.RUNNING
        order.append(r.trial_id)
        store.append(r, log)

    s = OptunaStudySearcher(
        spec,
        study,
        budget=3,
        on_record=on_record,
        make_missing_record=lambda n, tid, p, why: replace(record_for(spec, n, tid, p, False), message=why),
    )
    cfgs = {tid: s.suggest(tid) for tid in ("a", "b", "c")}
    assert s.suggest("d") == Searcher.FINISHED
    assert (
        cfgs["a"]["params"]
        == spec.baseline
        == {"mem_fraction_static": 0.85, "max_running_requests": 32, "cuda_graph_max_bs_decode": 32}
    )  # the baseline first
    ok = record_for(spec, cfgs["a"]["number"], "a", cfgs["a"]["params"], True)
    s.on_trial_complete("a", s.inbox.report("a", ok.to_json(), "L"))
    bad = record_for(spec, cfgs["b"]["number"], "b", cfgs["b"]["params"], False)
    s.on_trial_complete("b", s.inbox.report("b", bad.to_json()))
    s.on_trial_complete("c", None, error=True)  # the trial function itself crashed

    assert order == ["a", "b", "c"]
    trials = [t for t in study.get_trials() if "skipped" not in t.user_attrs]  # proposals set aside, not launched
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 3
    assert trials[0].constraints[LAUNCH_CONSTRAINT] == 0.0 and trials[0].values == [1000.0]
    assert trials[1].constraints[LAUNCH_CONSTRAINT] == 1.0, "a failed launch must be told as infeasible"
    assert trials[2].constraints[LAUNCH_CONSTRAINT] == 1.0
    loaded = store.load()
    assert loaded[2].message.startswith("the trial function raised")
    assert (tmp_path / "s" / "logs" / "0000-a.log").read_text() == "L"


def test_another_proposer_is_handed_to_the_searcher(tmp_path: Path) -> None:
    """A proposal strategy is a Proposer the searcher is given: it is asked with the running points and the budget
    left, and told each result, without a change to the searcher."""
    (tmp_path / "tiny.yaml").write_text(TINY)
    spec = load_study(tmp_path / "tiny.yaml")

    class Listed(Proposer):
        """Proposes the space's points in a fixed order."""

        def __init__(self, *args) -> None:  # type: ignore[no-untyped-def]
            super().__init__(*args)
            self.asked: list[tuple[int, int, bool]] = []
            self.results: list[int] = []

        def propose(self, running, *, left, finishing):  # type: ignore[no-untyped-def]
            self.asked.append((len(running), left, finishing))
            return self._ask_fixed({"cpb": [2048, 1024][len(self.asked) - 1]})

        def told(self, params, told) -> None:  # type: ignore[no-untyped-def]
            super().told(params, told)
            self.results.append(told.number)

    study = open_study(spec, None)
    s = OptunaStudySearcher(
        spec,
        study,
        budget=2,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("no missing record expected"),
        proposer=Listed,
    )
    a, b = s.suggest("a"), s.suggest("b")
    assert s.suggest("c") == Searcher.FINISHED
    assert [a["params"], b["params"]] == [{"cpb": 2048}, {"cpb": 1024}]
    s.on_trial_complete("a", s.inbox.report("a", record_for(spec, a["number"], "a", a["params"], True).to_json()))
    assert isinstance(s.proposer, Listed)
    assert s.proposer.asked == [(0, 2, False), (1, 1, False)] and s.proposer.results == [a["number"]]


def test_reconcile_after_killed_driver(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    t0, t1 = study.ask(), study.ask()  # both running when the driver was killed
    store.append(record_for(spec, t0.number, "x", {}, True))  # t0's record was written, not told
    del study
    study = open_study(spec, store.db_url)  # a new driver
    done = reconcile(study, spec, store.load())
    assert done == 1
    states = {t.number: t.state for t in study.get_trials()}
    assert states[t0.number] == optuna.trial.TrialState.COMPLETE
    assert states[t1.number] == optuna.trial.TrialState.FAIL
    assert study.trials[t0.number].values == [1000.0 + t0.number]
    # told as the searcher tells a trial: a killed driver's record keeps its id and outcome in the Optuna study
    assert study.trials[t0.number].user_attrs["trial_id"] == "x"
    assert study.trials[t0.number].user_attrs["outcome"] == "complete"


def test_an_interrupted_seed_point_runs_on_resume(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM while the baseline (a seed point) ran: the resume failed it in Optuna and nothing queued it again (seed
    points are enqueued only when a study opens empty), so the study never measured the user's configuration."""
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    searcher = OptunaStudySearcher(
        spec, study, budget=4, on_record=lambda r, log: store.append(r, log), make_missing_record=lambda *a: None
    )
    first = searcher.suggest("a")
    assert first["params"] == spec.baseline  # type: ignore[index]  # measured first
    del searcher, study  # the driver is interrupted while the baseline runs: no record
    study = open_study(spec, store.db_url)
    assert reconcile(study, spec, store.load()) == 0
    assert study.trials[first["number"]].state == optuna.trial.TrialState.FAIL  # type: ignore[index]
    resumed = OptunaStudySearcher(
        spec, study, budget=4, on_record=lambda r, log: store.append(r, log), make_missing_record=lambda *a: None
    )
    again = resumed.suggest("b")
    assert again["params"] == spec.baseline  # type: ignore[index]


TINY = """
study: {name: tiny, engine: sim, trials: 3, sampler: random, seed: 3}
sim: {profile: h200-llama-1b}
load_levels: [1]
params:
  cpb: {flag: chunked-prefill-size, type: categorical, choices: [1024, 2048]}
"""


def test_a_measured_point_is_not_launched_again(tmp_path: Path) -> None:
    (tmp_path / "tiny.yaml").write_text(TINY)
    spec = load_study(tmp_path / "tiny.yaml")
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    s = OptunaStudySearcher(
        spec,
        study,
        budget=3,
        on_record=lambda r, log: store.append(r, log),
        make_missing_record=lambda *a: pytest.fail("no missing record expected"),
    )
    seen = []
    for tid in ("a", "b"):
        cfg = s.suggest(tid)
        seen.append(cfg["params"]["cpb"])
        s.on_trial_complete(
            tid, s.inbox.report(tid, record_for(spec, cfg["number"], tid, cfg["params"], True).to_json())
        )
    assert sorted(seen) == [1024, 2048], "the second trial must not repeat the first (it was answered from it)"
    before = s.proposer.duplicates_skipped
    # both points measured: 25 repeats are set aside, the space is listed, nothing is left: a measured point is
    # launched again (the budget left re-measures)
    third = s.suggest("c")
    assert third["params"]["cpb"] in (1024, 2048)
    assert s.proposer.duplicates_skipped - before == 25
    assert (
        s.proposer.exhausted == "search space exhausted: none of its 2 points is left to launch (2 measured or running)"
    )
    assert s.proposer.relaunched == 1
    repeats = [t for t in study.get_trials() if "duplicate_of" in t.user_attrs]
    assert len(repeats) == s.proposer.duplicates_skipped
    # a repeat is not told to the sampler as a second result: TPE would count one point many times
    assert all(t.state == optuna.trial.TrialState.FAIL for t in repeats)
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.get_trials()) == 2


def test_an_unreadable_record_is_kept_raw_and_told_as_failed(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    s = OptunaStudySearcher(
        spec,
        study,
        budget=1,
        on_record=lambda r, log: store.append(r, log),
        make_missing_record=lambda n, tid, p, why: replace(record_for(spec, n, tid, p, False), message=why),
        on_raw_result=store.save_raw,
    )
    cfg = s.suggest("a")
    bad = {**record_for(spec, cfg["number"], "a", cfg["params"], True).to_json(), "outcome": "from_the_future"}
    s.on_trial_complete("a", s.inbox.report("a", bad))
    rec = store.load()[0]
    assert rec.outcome is TrialOutcome.FAILED and "could not be read" in rec.message
    raw = tmp_path / "s" / "trials" / f"{cfg['number']:04d}-a.raw.json"
    assert json.loads(raw.read_text())["outcome"] == "from_the_future"
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE


def test_a_fixed_flag_the_engine_rejects_stops_the_study(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    s = OptunaStudySearcher(
        spec, study, budget=5, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )
    assert "attention-backend" in always_passed_flags(spec)  # fixed in smoke.yaml's server.flags
    assert "cuda-graph-max-bs-decode" not in always_passed_flags(spec)  # conditional
    cfg = s.suggest("a")
    rec = replace(
        record_for(spec, cfg["number"], "a", cfg["params"], False),
        failure=FailureKind.UNKNOWN_FLAG,
        rejected_flags=["attention-backend"],
        message="the installed engine (sglang 0.5.9) does not know --attention-backend (did you mean "
        "--attention-backend-x?). Remove the flag from the study file or install a release that has it",
    )
    s.on_trial_complete("a", s.inbox.report("a", rec.to_json()))
    assert "every trial would fail the same way" in s.stop_reason
    assert s.suggest("b") == Searcher.FINISHED


def test_an_unknown_conditional_flag_does_not_stop_the_study(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    s = OptunaStudySearcher(
        spec, study, budget=5, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )
    cfg = s.suggest("a")
    rec = replace(
        record_for(spec, cfg["number"], "a", cfg["params"], False),
        failure=FailureKind.UNKNOWN_FLAG,
        rejected_flags=["cuda-graph-max-bs-decode"],
        message="the installed engine (sglang 0.5.9) does not know --cuda-graph-max-bs-decode. Remove ...",
    )
    s.on_trial_complete("a", s.inbox.report("a", rec.to_json()))
    assert s.stop_reason == ""


# An EAGLE-3 point of the user story's space, the start of the neighbour tests.
EAGLE_START = {
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "/models/public-k2-eagle3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "max_running_requests": 128,
    "mem_fraction_static": 0.85,
}


def test_neighbour_changes_one_parameter_and_keeps_conditions() -> None:
    import random

    from autotune.space.neighbours import neighbour
    from autotune.space.values import is_active

    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    rng = random.Random(1)
    start = dict(EAGLE_START)
    seen_off = False
    for _ in range(200):
        n = neighbour(spec, start, rng)
        assert n is not None and n != start
        for p in spec.params:  # exactly the active parameters are present, each with a value it can take
            assert (p.name in n) == is_active(p, n)
        if n["speculative_algorithm"] is None:
            seen_off = True
            assert set(n) == {"speculative_algorithm", "max_running_requests", "mem_fraction_static"}
        else:
            same = [k for k in start if start[k] == n.get(k)]
            assert len(same) >= len(start) - 2  # one changed (topk 1 -> 2 or 4 adds draft tokens)
            assert 0.75 <= n["mem_fraction_static"] <= 0.92
    assert seen_off


class _Screen(Rule):
    """A screen rule for the searcher's tests: sets aside what its function names (consulted after ``repeats``)."""

    name = "screen"

    def __init__(self, screen: Callable[[dict], str | None]) -> None:
        self.screen = screen

    def set_aside(self, params: dict, running: Collection[str]) -> str | None:
        return self.screen(params)


def _searcher(spec, study, screen=None):  # type: ignore[no-untyped-def]
    test_screen = _Screen(screen or (lambda p: None))
    rules = list(default_rules(spec))
    return OptunaStudySearcher(
        spec,
        study,
        budget=100,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("no missing record expected"),
        rules=Rules([rules[0], test_screen, *rules[1:]]),
    )


def _complete(s, spec, tid: str, cfg: dict, value: float) -> None:  # type: ignore[no-untyped-def]
    rec = replace(record_for(spec, cfg["number"], tid, cfg["params"], True), objectives={"output_tok_per_s@max": value})
    s.on_trial_complete(tid, s.inbox.report(tid, rec.to_json()))


def test_screened_points_are_set_aside_but_seed_points_are_not() -> None:
    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    study = open_study(spec, None)
    asked: list[dict] = []

    def screen(p: dict) -> str | None:
        asked.append(p)
        return "screened" if p.get("speculative_num_steps") == 3 or p.get("speculative_algorithm") is None else None

    s = _searcher(spec, study, screen)
    base = s.suggest("base")  # the user's own launch, capped: the study's baseline, first, screened or not
    assert base["params"] == spec.baseline == spec.points_to_evaluate[0]
    _complete(s, spec, "base", base, 800.0)
    lifted = s.suggest("lifted")  # the user's launch with its cap lifted to the top load: a seed point, screened or not
    assert lifted["params"] == {**spec.points_to_evaluate[0], "max_running_requests": 128}
    _complete(s, spec, "lifted", lifted, 1200.0)
    second = s.suggest("b")
    assert second["params"]["speculative_algorithm"] is None  # the second seed: launched although screened
    _complete(s, spec, "b", second, 1500.0)
    for i in range(15):
        cfg = s.suggest(f"c{i}")
        assert screen(cfg["params"]) is None, "a screened proposal was launched"
        _complete(s, spec, f"c{i}", cfg, 1000.0 + i)
    reasons = [str(t.user_attrs.get("skipped", "repeats")) for t in study.get_trials()]
    skipped = [
        t for t, r in zip(study.get_trials(), reasons, strict=True) if not r.startswith(("repeats", "repaired: "))
    ]
    assert len(skipped) == s.proposer.screened_skipped and all(t.state == optuna.trial.TrialState.FAIL for t in skipped)
    assert sum(r.startswith("repaired: ") for r in reasons) == s.proposer.repaired
    assert any(t.user_attrs["skipped"].startswith("screened") for t in skipped)


def test_repeated_proposals_lead_to_an_unmeasured_neighbour(tmp_path: Path) -> None:
    # parameters that the top load does not make equivalent (autotune.policy.repair): every point is a distinct one
    (tmp_path / "small.yaml").write_text(
        TINY.replace("sampler: random", "sampler: tpe").replace(
            "choices: [1024, 2048]}",
            "choices: [1024, 2048]}\n  cgbs: {flag: cuda-graph-max-bs, type: categorical, choices: [8, 16, 32, 64]}",
        )
    )
    spec = load_study(tmp_path / "small.yaml")
    study = open_study(spec, None)
    s = _searcher(spec, study)
    measured = set()
    for i in range(8):  # every point of the space, each once
        cfg = s.suggest(f"t{i}")
        key = (cfg["params"]["cpb"], cfg["params"]["cgbs"])
        assert key not in measured, f"launch {i} repeats {key}"
        measured.add(key)
        _complete(s, spec, f"t{i}", cfg, 100.0 if key == (2048, 64) else 50.0)
    assert len(measured) == 8
    told = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(told) == 8, "only measured points are told to the sampler"


def test_the_stop_rule_reads_the_rejected_flags_not_the_message(spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A message that merely mentions an always-passed flag does not stop the study; the record's rejected flags do,
    for an invalid value as for an unknown flag."""
    store = StudyStore(tmp_path / "s")
    store.ensure()
    study = open_study(spec, store.db_url)
    s = OptunaStudySearcher(
        spec, study, budget=5, on_record=lambda r, log: None, make_missing_record=lambda *a: pytest.fail("unexpected")
    )
    cfg = s.suggest("a")
    rec = replace(
        record_for(spec, cfg["number"], "a", cfg["params"], False),
        failure=FailureKind.UNKNOWN_FLAG,
        rejected_flags=["no-such-flag"],
        message="does not know --no-such-flag (unlike --attention-backend)",
    )
    s.on_trial_complete("a", s.inbox.report("a", rec.to_json()))
    assert s.stop_reason == ""
    cfg = s.suggest("b")
    rec = replace(
        record_for(spec, cfg["number"], "b", cfg["params"], False),
        failure=FailureKind.INVALID_VALUE,
        rejected_flags=["attention-backend"],
        message="argument --attention-backend: invalid choice: 'x'",
    )
    s.on_trial_complete("b", s.inbox.report("b", rec.to_json()))
    assert "--attention-backend" in s.stop_reason


SCREENED = """
study:
  name: screened
  engine: sim
  trials: 20
  sampler: tpe
  seed: 1
  points_to_evaluate: [{cpb: 1024, cgbs: 8}]
sim: {profile: h200-llama-1b}
load_levels: [1]
params:
  cpb: {flag: chunked-prefill-size, type: categorical, choices: [1024, 2048, 4096]}
  cgbs: {flag: cuda-graph-max-bs, type: int, low: 8, high: 15}
"""


def test_a_point_the_proposals_miss_is_found_by_listing_the_space(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Proposals that find nothing to launch (here: one try each, no walk) fall back on the listed space: the
    unmeasured point that passes the screen, the nearest to the best one first; then the search ends, saying why."""
    import autotune.study.proposer as proposer_mod

    monkeypatch.setattr(proposer_mod, "MAX_DUPLICATE_ASKS", 1)
    monkeypatch.setattr(proposer_mod, "NEIGHBOUR_AFTER", 99)
    (tmp_path / "s.yaml").write_text(SCREENED)
    spec = load_study(tmp_path / "s.yaml")
    allowed = {(1024, 8), (1024, 9), (2048, 12), (4096, 15)}

    def screen(p: dict) -> str | None:
        return None if (p["cpb"], p["cgbs"]) in allowed else "predicted not to fit in GPU memory"

    study = open_study(spec, None)
    s = _searcher(spec, study, screen)
    launched = []
    for i in range(7):
        cfg = s.suggest(f"t{i}")
        launched.append((cfg["params"]["cpb"], cfg["params"]["cgbs"]))
        _complete(s, spec, f"t{i}", cfg, 500.0 if launched[-1] == (1024, 8) else 100.0)
    assert launched[0] == (1024, 8)  # the seed point
    assert set(launched[:4]) == allowed, "every allowed point once, no screened one, no repeat"
    assert launched.index((1024, 9)) < launched.index((4096, 15)), "nearest the best point first"
    assert s.proposer.exhausted == (
        "search space exhausted: none of its 24 points is left to launch (4 measured or running, "
        "20 set aside before launch)"
    )
    # then measured points again, never a point set aside (the last proposals were all screened: the best point)
    assert launched[4:] == [(1024, 8)] * 3 and s.proposer.relaunched == 3


def test_the_walk_only_where_the_space_cannot_be_listed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Set-aside proposals on a space that can be listed fall back on the listing (the unmeasured point nearest the
    best); only a space too large to list takes the walk's neighbour (issue #29, round 29)."""
    import autotune.study.proposer as proposer_mod

    walked: list[dict] = []
    walk = proposer_mod.Proposer._neighbour
    monkeypatch.setattr(proposer_mod.Proposer, "_neighbour", lambda s, p, r: walked.append(p) or walk(s, p, r))
    (tmp_path / "s.yaml").write_text(SCREENED)
    spec = load_study(tmp_path / "s.yaml")
    allowed = {(1024, 8), (1024, 9), (2048, 12), (4096, 15), (4096, 14)}
    for limit, walks in ((proposer_mod.ENUMERATE_LIMIT, False), (3, True)):  # 24 points listed, or not
        monkeypatch.setattr(proposer_mod, "ENUMERATE_LIMIT", limit)
        walked.clear()
        s = _searcher(spec, open_study(spec, None), lambda p: None if (p["cpb"], p["cgbs"]) in allowed else "screened")
        for i in range(4):
            cfg = s.suggest(f"t{i}")
            _complete(s, spec, f"t{i}", cfg, 100.0 + i)
        assert bool(walked) is walks


def test_a_space_too_large_to_list_still_launches_the_last_proposal(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import autotune.study.proposer as proposer_mod

    monkeypatch.setattr(proposer_mod, "ENUMERATE_LIMIT", 3)  # the 2-point TINY space lists; 24 points do not
    (tmp_path / "s.yaml").write_text(SCREENED)
    spec = load_study(tmp_path / "s.yaml")
    study = open_study(spec, None)
    s = _searcher(spec, study, lambda p: "screened")
    seed = s.suggest("seed")
    _complete(s, spec, "seed", seed, 100.0)
    cfg = s.suggest("next")  # everything screened: a screened proposal is launched anyway, as before listing
    assert cfg != Searcher.FINISHED and not s.proposer.exhausted


def ngram_space(tmp_path: Path):  # type: ignore[no-untyped-def]
    """search_spaces/h200-tp1-ngram.yaml with its prompts file (made on the device) replaced by a local one."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hello"}\n')
    text = (ROOT / "search_spaces" / "h200-tp1-ngram.yaml").read_text()
    space = tmp_path / "h200-tp1-ngram.yaml"
    space.write_text(text.replace("/tmp/realfiles/sharegpt-256-chat.jsonl", str(prompts)))
    return load_study(space)


def _accepting(accept: float, concurrencies: tuple[int, ...]) -> tuple[LevelSummary, ...]:
    """Levels measured with one accept length (the broken-drafter set-aside reads only that)."""
    return tuple(
        LevelSummary(
            concurrency=c,
            requests=8,
            failed=0,
            duration_s=1.0,
            output_tok_per_s=40.0,
            request_per_s=1.0,
            input_tok_per_s=1.0,
            ttft_ms=None,
            itl_ms=None,
            tpot_ms=None,
            e2e_ms=None,
            accept_length=accept,
        )
        for c in concurrencies
    )


def test_learned_sets_aside_an_ngram_setting_that_accepted_nothing(tmp_path: Path) -> None:
    """The drafter gate on NGRAM (no draft model): its n-gram settings are the drafter; a poor store (capacity 64)
    measured at accept length <= BROKEN_ACCEPT sets aside every point with the same settings, not other stores."""
    from autotune.bench.types import BenchResult
    from autotune.policy.learned import Learned

    spec = ngram_space(tmp_path)
    learned = Learned(spec)
    poor = {
        "speculative_algorithm": "NGRAM",
        "speculative_num_draft_tokens": 12,
        "speculative_ngram_max_bfs_breadth": 10,
        "speculative_ngram_max_trie_depth": 18,
        "speculative_ngram_capacity": 64,
    }
    levels = _accepting(1.02, (1, 8, 32))
    rec = replace(record_for(spec, 0, "a", poor, True), bench=BenchResult(levels=levels))
    assert learned.observe(poor, rec) == 1.02
    assert "accepted no draft token" in (learned.reason(dict(poor)) or "")
    assert "--speculative-ngram-capacity 64" in (learned.reason(dict(poor)) or "")
    assert learned.reason({**poor, "speculative_ngram_capacity": 10000000}) is None
    other_tree = {**poor, "speculative_num_draft_tokens": 4, "speculative_ngram_max_bfs_breadth": 1}
    assert "accepted no draft token" in (learned.reason(other_tree) or "")  # the same store, another tree
    assert learned.reason({"speculative_algorithm": None}) is None


def test_learned_keys_a_drafter_by_its_algorithm_and_never_sets_aside_speculation_off(tmp_path: Path) -> None:
    """A drafter that accepted nothing under the wrong algorithm (EAGLE with an EAGLE-3 drafter) sets aside that
    pairing, not the drafter under EAGLE3; and a point with speculation off never pays for a drafter, even where the
    drafter parameter has no ``when`` and the point names one. Both were set aside by the drafter's path alone."""
    import yaml

    from autotune.bench.types import BenchResult
    from autotune.policy.learned import Learned

    doc = yaml.safe_load((ROOT / "search_spaces" / "speculative.yaml").read_text())
    doc["params"]["speculative_algorithm"]["choices"] = [None, "EAGLE", "EAGLE3"]
    for name in ("speculative_num_steps", "speculative_eagle_topk"):
        doc["params"][name]["when"] = {"speculative_algorithm": ["EAGLE", "EAGLE3"]}
    del doc["params"]["speculative_draft_model_path"]["when"]  # valid: SGLang ignores it with speculation off
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_study(path)
    learned = Learned(spec)
    wrong = {
        "speculative_algorithm": "EAGLE",
        "speculative_draft_model_path": "/models/public-k2-eagle3",
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "max_running_requests": None,
        "mem_fraction_static": 0.85,
    }
    levels = _accepting(1.0, (1, 8, 32, 128))
    rec = replace(record_for(spec, 0, "a", wrong, True), bench=BenchResult(levels=levels))
    assert learned.observe(wrong, rec) == 1.0
    assert "accepted no draft token" in (learned.reason({**wrong, "speculative_num_steps": 5}) or "")
    assert learned.reason({**wrong, "speculative_algorithm": "EAGLE3"}) is None
    assert learned.reason({**wrong, "speculative_algorithm": None}) is None


def test_a_multi_objective_nsga2_searcher_pickles_for_tune(tmp_path: Path) -> None:
    """Tune pickles the searcher into tuner.pkl when the study starts; NSGA-II's sampler holds a thread lock, so a
    study with ``sampler: nsga2`` used to stop there with ``cannot pickle '_thread.lock' object``."""
    import yaml
    from ray import cloudpickle

    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["study"]["sampler"] = "nsga2"
    doc["study"]["objectives"].append({"metric": "tpot_ms.median", "level": 1, "direction": "minimize"})
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    spec = load_study(path)
    s = OptunaStudySearcher(
        spec,
        open_study(spec, f"sqlite:///{tmp_path / 'study.db'}"),
        budget=2,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("unexpected"),
    )
    assert isinstance(s.study.sampler, optuna.samplers.NSGAIISampler)
    cloudpickle.dumps(s)
    assert s.study is not None  # the live searcher keeps its study


class _Fixed(optuna.samplers.BaseSampler):
    """Proposes the same values every time: a resumed study's seeded sampler replaying its first proposals."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def infer_relative_search_space(self, study, trial):  # type: ignore[no-untyped-def]
        return {}

    def sample_relative(self, study, trial, search_space):  # type: ignore[no-untyped-def]
        return {}

    def sample_independent(self, study, trial, name, distribution):  # type: ignore[no-untyped-def]
        return self.values[name]


def test_a_repaired_proposal_that_opens_a_conditional_parameter_is_not_a_repeat(spec) -> None:  # type: ignore[no-untyped-def]
    """smoke: a proposal capped at 10 is repaired to 64 > 16, which opens cuda_graph_max_bs_decode; the sampler fills
    it in after the repeat check, so the point launched could be one measured already (seen on a resumed study:
    trial 9 repeated trial 5 exactly)."""
    sampler = _Fixed({"mem_fraction_static": 0.53, "max_running_requests": 10, "cuda_graph_max_bs_decode": 256})
    study = optuna.create_study(direction="maximize", sampler=sampler)
    rules = default_rules(spec, sizes=None)
    proposer = Proposer(spec, study, rules)
    trial, first = proposer.propose(set(), left=5, finishing=False)
    assert first == {"mem_fraction_static": 0.53, "max_running_requests": 64, "cuda_graph_max_bs_decode": 256}
    told = Told(trial.number, [1000.0], {"ttft_ms.p99@max": -1.0, "itl_ms.p99@max": -1.0})
    study.tell(trial, [1000.0])
    rules.restore(first, told)
    proposer.told(first, told)
    _, second = proposer.propose(set(), left=4, finishing=False)
    assert second != first
    skipped = [t.user_attrs.get("skipped", "") for t in study.trials if t.state is optuna.trial.TrialState.FAIL]
    assert any(s.startswith("repeats trial 1") for s in skipped), skipped


def test_a_resumed_searcher_learns_again_from_the_stored_records(tmp_path: Path) -> None:
    """What the rules learnt from records (a drafter that accepted nothing, the KV cache a launch allocated) was lost on
    resume: the Optuna study holds neither, so the resumed search launched the broken drafter again."""
    from autotune.bench.types import BenchResult
    from autotune.core.failures import PhaseTimings
    from autotune.policy.repairing import Repair

    spec = load_study(ROOT / "search_spaces" / "speculative.yaml")
    store = StudyStore(tmp_path / "s")
    store.ensure()

    def missing(n, tid, p, why):  # type: ignore[no-untyped-def]
        return replace(record_for(spec, n, tid, p, False), message=why)

    s = OptunaStudySearcher(
        spec, open_study(spec, store.db_url), budget=1, on_record=store.append, make_missing_record=missing
    )
    cfg = s.suggest("a")
    rec = replace(
        record_for(spec, cfg["number"], "a", cfg["params"], True),
        bench=BenchResult(levels=_accepting(1.0, (1, 8, 32, 128))),
        phases=PhaseTimings(kv_cache_tokens=123_456),
    )
    s.on_trial_complete("a", s.inbox.report("a", rec.to_json(), "L"))
    other = {**cfg["params"], "speculative_num_steps": 5}
    assert "accepted no draft token" in (s.rules.set_aside(other, ()) or "")

    resumed = OptunaStudySearcher(
        spec,
        open_study(spec, store.db_url),
        budget=1,
        on_record=store.append,
        make_missing_record=missing,
        records=store.load(),
    )
    assert "accepted no draft token" in (resumed.rules.set_aside(other, ()) or "")
    repair = next(r for r in resumed.rules if isinstance(r, Repair))
    assert len(repair.kv.errors) == 1  # the KV model's correction too
