"""The finalist stage's pure logic without Ray: selection, interleaving, resume, ranking, separable vs tie, storage."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotune.bench.types import BenchResult, Dist, LevelSummary
from autotune.finalists.choice import (
    decide,
    missing_slots,
    next_stage,
    run_trial_id,
    select_finalists,
    stage_finalists,
    study_outcome,
)
from autotune.finalists.outcome import FinalistRun, StagePlan
from autotune.finalists.store import FinalistStore
from autotune.space import Objective
from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord

OBJ = Objective("output_tok_per_s", "max", "maximize")
KEY = OBJ.key  # "output_tok_per_s@max", the records' objective key


def trial(
    number: int, value: float | None, *, feasible: bool = True, ttft: float = 100.0, mem: float | None = None
) -> TrialRecord:
    complete = value is not None
    d = Dist(mean=ttft / 2, median=ttft / 2, p90=ttft, p99=ttft, count=8)
    lv = LevelSummary(
        concurrency=32,
        requests=8,
        failed=0,
        duration_s=1.0,
        output_tok_per_s=value or 0.0,
        request_per_s=1.0,
        input_tok_per_s=1.0,
        ttft_ms=d,
        itl_ms=d,
        tpot_ms=d,
        e2e_ms=d,
        accept_length=None,
    )
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={"x": number},
        flags={"mem-fraction-static": mem} if mem is not None else {},
        env={},
        argv=[],
        outcome=TrialOutcome.COMPLETE if complete else TrialOutcome.FAILED,
        failure=None if complete else FailureKind.OOM_AT_LAUNCH,
        bench=BenchResult(levels=(lv,)) if complete else None,
        objectives={KEY: value} if complete else {},
        feasible=complete and feasible,
    )


def runs(
    stage: int,
    values: dict[int, list[float]],
    *,
    ttft: dict[int, list[float]] | None = None,
    mem: dict[int, float] | None = None,
) -> list[FinalistRun]:
    out = []
    for number, vals in values.items():
        for rnd, v in enumerate(vals, start=1):
            t = (ttft or {}).get(number, [100.0] * len(vals))[rnd - 1]
            rec = replace(
                trial(number, v, ttft=t, mem=(mem or {}).get(number)), trial_id=run_trial_id(f"t{number}", stage, rnd)
            )
            out.append(FinalistRun(stage=stage, round=rnd, repeats=number, repeats_trial_id=f"t{number}", record=rec))
    return out


def trials_of(*records: TrialRecord) -> dict[int, TrialRecord]:
    return {r.number: r for r in records}


def test_select_top_k_feasible() -> None:
    records = [
        trial(0, 100.0),
        trial(1, 300.0),
        trial(2, 500.0, feasible=False),
        trial(3, None),
        trial(4, 200.0),
        trial(5, 300.0),
    ]
    assert select_finalists(records, KEY, "maximize", 3) == (1, 5, 4)  # 2 infeasible, 3 failed; tie -> lower number
    assert select_finalists(records, KEY, "minimize", 2) == (0, 4)
    assert select_finalists(records, KEY, "maximize", 0) == ()
    assert select_finalists(records, KEY, "maximize", 10) == (1, 5, 4, 0)


def test_interleaved_order_and_resume() -> None:
    plan = StagePlan(stage=1, finalists=(7, 3, 5), rounds=2)
    assert plan.slots() == [(1, 7), (1, 3), (1, 5), (2, 7), (2, 3), (2, 5)]  # A B C A B C
    done = runs(1, {7: [1.0], 3: [1.0]})
    assert missing_slots(plan, done) == [(1, 5), (2, 7), (2, 3), (2, 5)]
    # a killed driver: the same stage is resumed, not restarted
    assert next_stage([plan], done, (7, 3, 5), 2, new_round=False) == plan
    full = runs(1, {7: [1.0, 1.0], 3: [1.0, 1.0], 5: [1.0, 1.0]})
    assert next_stage([plan], full, (7, 3, 5), 2, new_round=False) is None  # complete: nothing due
    again = next_stage([plan], full, (7, 3, 5), 2, new_round=True)  # --finalists-only: a new stage, old kept
    assert again == StagePlan(stage=2, finalists=(7, 3, 5), rounds=2)
    assert next_stage([], [], (7, 3), 2, new_round=False) == StagePlan(1, (7, 3), 2)
    assert next_stage([plan], full, (7, 3, 9), 2, new_round=False) == StagePlan(2, (7, 3, 9), 2)  # new top K
    assert next_stage([], [], (), 2, new_round=True) is None


def test_separable_winner() -> None:
    trials = trials_of(trial(1, 1000.0), trial(2, 950.0))
    d = decide(trials, runs(1, {1: [1000.0, 1010.0, 1005.0], 2: [900.0, 905.0, 910.0]}), OBJ)
    assert (d.method, d.winner) == ("separable", 1)
    assert d.comparisons[0].separable and d.comparisons[0].p_value is not None and d.comparisons[0].p_value < 0.05
    assert "trial 1 wins" in d.summary and "Welch" in d.summary


def test_leader_by_relaunch_mean_not_by_original_trial() -> None:
    trials = trials_of(trial(1, 2000.0), trial(2, 950.0))  # trial 1's original launch was lucky
    d = decide(trials, runs(1, {1: [900.0, 905.0, 910.0], 2: [1000.0, 1010.0, 1005.0]}), OBJ)
    assert (d.method, d.winner) == ("separable", 2)


def test_tie_picks_by_ttft_then_memory() -> None:
    trials = trials_of(trial(1, 1000.0, mem=0.9), trial(2, 990.0, mem=0.8), trial(3, 980.0, mem=0.85))
    values = {1: [1000.0, 900.0], 2: [980.0, 960.0], 3: [950.0, 1000.0]}  # overlapping: not separable with 2 launches
    d = decide(trials, runs(1, values, ttft={1: [200.0, 202.0], 2: [100.0, 101.0], 3: [150.0, 152.0]}), OBJ)
    assert d.method == "tie" and set(d.tied) == {1, 2, 3}
    assert d.winner == 2 and "TTFT p99" in d.secondary
    assert d.tie_within_pct == pytest.approx(100 * (975.0 - 950.0) / 975.0)
    assert "tie within 2.6%" in d.summary
    # TTFT within noise too -> the leader (the best relaunch mean), not the config that holds less memory
    d = decide(
        trials,
        runs(1, values, ttft={1: [100.0, 140.0], 2: [120.0, 110.0], 3: [130.0, 100.0]}, mem={1: 0.9, 2: 0.8, 3: 0.85}),
        OBJ,
    )
    assert (d.method, d.winner, d.leader) == ("tie", 3, 3) and "best relaunch mean" in d.secondary
    values = {1: [1000.0, 960.0], 2: [980.0, 960.0], 3: [950.0, 1000.0]}  # trial 1 leads by mean, holds more memory
    d = decide(
        trials,
        runs(1, values, ttft={1: [100.0, 140.0], 2: [120.0, 110.0], 3: [130.0, 100.0]}, mem={1: 0.9, 2: 0.8, 3: 0.85}),
        OBJ,
    )
    assert (d.method, d.winner) == ("tie", 1) and "best relaunch mean" in d.secondary
    # equal means: memory, then the trial number
    same = {1: [1000.0, 960.0], 2: [990.0, 970.0]}
    d = decide(
        trials_of(trial(1, 1000.0, mem=0.9), trial(2, 990.0, mem=0.8)),
        runs(1, same, ttft={1: [100.0, 140.0], 2: [120.0, 110.0]}, mem={1: 0.9, 2: 0.8}),
        OBJ,
    )
    assert (d.method, d.winner) == ("tie", 2) and "mem-fraction-static" in d.secondary
    plain = trials_of(trial(1, 1000.0), trial(2, 990.0))
    d = decide(plain, runs(1, same, ttft={1: [100.0, 140.0], 2: [120.0, 110.0]}), OBJ)
    assert (d.method, d.winner) == ("tie", 1) and "lowest trial number" in d.secondary


def test_one_launch_each_is_never_separable() -> None:
    trials = trials_of(trial(1, 1000.0), trial(2, 500.0))
    d = decide(trials, runs(1, {1: [1000.0], 2: [500.0]}), OBJ)
    assert d.method == "tie" and d.winner == 1 and d.comparisons[0].p_value is None


def test_failed_relaunch_cannot_win_over_a_clean_one() -> None:
    trials = trials_of(trial(1, 1000.0), trial(2, 900.0))
    rs = runs(1, {1: [1200.0, 1210.0], 2: [900.0, 905.0]})
    rs[1] = replace(rs[1], record=replace(trial(1, None), trial_id="t1-f1r2"))  # trial 1's second relaunch OOMs
    d = decide(trials, rs, OBJ)
    assert (d.method, d.winner) == ("single", 2) and "only finalist that relaunched cleanly" in d.summary
    none = decide(trials, [replace(r, record=replace(trial(r.repeats, None), trial_id="x")) for r in rs], OBJ)
    assert (none.method, none.winner) == ("none", None)


def test_minimize_direction() -> None:
    key = "tpot_ms.median@max"
    a = replace(trial(1, 1.0), objectives={key: 10.0})
    b = replace(trial(2, 1.0), objectives={key: 12.0})
    rs = []
    for number, vals in {1: [10.0, 10.1, 10.2], 2: [12.0, 12.1, 12.2]}.items():
        for rnd, v in enumerate(vals, start=1):
            rec = replace(trial(number, 1.0), objectives={key: v}, trial_id=f"t{number}-f1r{rnd}")
            rs.append(FinalistRun(1, rnd, number, f"t{number}", rec))
    d = decide(trials_of(a, b), rs, Objective("tpot_ms.median", "max", "minimize"))
    assert (d.method, d.winner) == ("separable", 1) and d.comparisons[0].diff_pct > 0


def test_store_roundtrip_and_outcome(tmp_path: Path) -> None:
    store = FinalistStore(tmp_path)
    plan = StagePlan(1, (1, 2), 2)
    store.save_plan(plan)
    made = runs(1, {1: [1000.0, 1010.0], 2: [900.0, 905.0]})
    for r in made:
        store.append(r, log_text="log")
    with store.runs_path.open("a") as fh:
        fh.write('{"kind": "finalist", "stage": 1, "ro')  # a torn line: skipped, and not glued to the next record
    store.append(runs(2, {1: [1001.0]})[0])
    loaded = store.load()
    assert [r.key for r in loaded] == [(1, 1, 1), (1, 1, 2), (1, 2, 1), (1, 2, 2), (2, 1, 1)]
    assert loaded[0] == made[0] and store.plans() == [plan]
    assert (tmp_path / "logs" / "0001-t1-f1r1.log").read_text() == "log"
    records = [trial(1, 1000.0), trial(2, 900.0), trial(3, 100.0)]
    out = study_outcome(records, store.plans(), loaded, objective=OBJ, alpha=0.05, count=2)
    assert out.finalists == (1, 2) and out.decision is not None and out.decision.winner == 1
    assert out.launches == 4 and len(out.per_stage) == 1  # stage 2 has no plan for these finalists
    assert study_outcome(records, [], [], objective=OBJ, alpha=0.05, count=0).decision is None


def test_cli_finalists_options(tmp_path: Path) -> None:
    from autotune.core.errors import AutotuneError
    from autotune.search import resolve
    from autotune.study.driver import StudyDriver

    args, spec = resolve(["--space", "smoke", "--finalists", "2", "--finalists-only"])
    assert spec.finalists.count == 2 and args.finalists_only
    assert resolve(["--space", "smoke"])[1].finalists.count == 3
    with pytest.raises(AutotuneError, match="--finalists must be 0"):
        resolve(["--space", "smoke", "--finalists", "-1"])
    driver = StudyDriver(spec, results_dir=tmp_path, finalists_only=True)
    with pytest.raises(AutotuneError, match="no finished trials; run the study first"):
        driver.run()


def test_summary_marks_the_finalist_winner() -> None:
    from autotune.export import format_summary_table

    records = [trial(1, 1000.0), trial(2, 900.0)]
    rs = runs(1, {1: [900.0, 905.0, 910.0], 2: [1000.0, 1010.0, 1005.0]})
    out = study_outcome(records, [StagePlan(1, (1, 2), 3)], rs, objective=OBJ, alpha=0.05, count=2)
    text = format_summary_table(records, [Objective("output_tok_per_s", "max", "maximize")], [32], finalists=out)
    assert "* best: trial 2" in text and "decided by the finalist stage: separable" in text
    assert "* best: trial 1" in format_summary_table(records, [Objective("output_tok_per_s", "max", "maximize")], [32])


def test_the_winner_is_reported_per_level_across_its_clean_relaunches() -> None:
    """The winner's figures at each level are pooled over its clean relaunches only: its failed relaunch, the other
    finalist's relaunches and the original (selected, so biased) trial are left out."""
    records = [trial(1, 5000.0), trial(2, 900.0)]
    made = runs(1, {1: [1000.0, 1100.0, 1200.0], 2: [500.0, 510.0, 505.0]})
    failed = [
        replace(made[0], round=4, repeats=n, record=replace(trial(n, None), trial_id=run_trial_id(f"t{n}", 1, 4)))
        for n in (1, 2)
    ]  # both finalists have a failed relaunch, so neither is disqualified by it
    out = study_outcome(records, [StagePlan(1, (1, 2), 4)], [*made, *failed], objective=OBJ, alpha=0.05, count=2)
    assert out.decision is not None and out.decision.winner == 1 and out.winner_launches == 3
    (level,) = out.winner_levels
    iv = level["intervals"]["output_tok_per_s"]
    assert level["concurrency"] == 32 and level["output_tok_per_s"] == pytest.approx(1100.0)
    assert iv["n"] == 3 and iv["sd"] == pytest.approx(100.0)
    assert (iv["high"] - iv["low"]) / 2 == pytest.approx(4.302652729911275 * 100.0 / 3**0.5)  # t(0.975, 2)
    # one new launch: the launch-to-launch sd relative to the mean, pooled over both finalists (2 + 2 degrees of
    # freedom), not the winner's 2 alone; t(0.975, 4) = 2.776
    cv = (((100.0 / 1100.0) ** 2 * 2 + (5.0 / 505.0) ** 2 * 2) / 4) ** 0.5
    assert iv["new_launch_df"] == 4 and "pooled over the 2 finalists" in iv["new_launch_basis"]
    half = (iv["new_launch_high"] - iv["new_launch_low"]) / 2
    assert half == pytest.approx(2.7764451051977987 * cv * 1100.0 * (1 + 1 / 3) ** 0.5)
    assert out.to_json()["winner_levels"][0]["intervals"]["output_tok_per_s"]["n"] == 3
    no_stage = study_outcome(records, [], [], objective=OBJ, alpha=0.05, count=2)
    assert no_stage.winner_levels == () and no_stage.to_json()["winner_launches"] == 0


def test_an_interrupted_stage_declares_no_winner_and_keeps_the_leader() -> None:
    """3 of 4 relaunches: the runner-up has one launch, which the tie rule cannot compare; the export keeps the leader
    by relaunch mean and says the stage must be resumed (not a tie broken by memory in favour of the slower config)."""
    records = [trial(0, 5684.0, mem=0.88), trial(4, 5388.0, mem=0.80)]
    made = runs(1, {0: [5338.0, 5082.0], 4: [4779.0]}, mem={0: 0.88, 4: 0.80})
    plan = StagePlan(1, (0, 4), 2)
    out = study_outcome(records, [plan], made, objective=OBJ, alpha=0.05, count=2)
    assert out.decision is not None and out.decision.method == "incomplete" and out.decision.winner == 0
    assert "3 of 4 relaunches" in out.decision.summary and "resumed" in out.decision.summary
    done = [*made, *runs(1, {4: [4779.0, 4800.0]}, mem={4: 0.80})[1:]]
    assert study_outcome(records, [plan], done, objective=OBJ, alpha=0.05, count=2).decision.method in (
        "separable",
        "tie",
    )


def test_leader_advantage_is_a_share_of_the_runner_up() -> None:
    """'X% better than the runner-up' is measured from the runner-up, as the verdict's gain is from the baseline:
    2,000 against 1,000 is +100% (it was 50%, a share of the leader); a lower TPOT of 10 against 12.5 is 20%."""
    trials = trials_of(trial(1, 2000.0), trial(2, 1000.0))
    d = decide(trials, runs(1, {1: [1990.0, 2010.0], 2: [995.0, 1005.0]}), OBJ)
    assert d.method == "separable" and d.comparisons[0].diff_pct == pytest.approx(100.0)
    assert "100.0% better than the runner-up" in d.summary
    key = "tpot_ms.median@max"
    rs = []
    for number, vals in {1: [9.9, 10.1], 2: [12.4, 12.6]}.items():
        for rnd, v in enumerate(vals, start=1):
            rs.append(
                FinalistRun(
                    1,
                    rnd,
                    number,
                    f"t{number}",
                    replace(trial(number, 1.0), objectives={key: v}, trial_id=f"t{number}-f1r{rnd}"),
                )
            )
    low = decide(
        trials_of(replace(trial(1, 1.0), objectives={key: 10.0}), replace(trial(2, 1.0), objectives={key: 12.5})),
        rs,
        Objective("tpot_ms.median", "max", "minimize"),
    )
    assert low.comparisons[0].diff_pct == pytest.approx(20.0)


def test_a_baseline_that_missed_a_constraint_cannot_win_though_its_relaunches_meet_it() -> None:
    """The baseline is relaunched even where its own launch missed a constraint (its figures are what the gain is
    measured from); relaunches that happen to meet the constraint do not make it the recommendation."""
    records = [trial(0, 2000.0, feasible=False), trial(1, 1000.0), trial(2, 900.0)]
    made = runs(1, {0: [2000.0, 2010.0], 1: [1000.0, 1005.0], 2: [900.0, 905.0]})  # every relaunch feasible
    plan = StagePlan(1, (1, 2, 0), 2)
    out = study_outcome(records, [plan], made, objective=OBJ, alpha=0.05, count=2, baseline={"x": 0})
    assert out.finalists == (1, 2, 0) and out.decision is not None
    assert (out.decision.method, out.decision.winner) == ("separable", 1)
    alone = decide(trials_of(records[0], records[1]), [r for r in made if r.repeats in (0, 1)], OBJ)
    assert (alone.method, alone.winner) == ("single", 1)
    assert "trial 0 missed a study constraint in its own launch" in alone.summary
    assert "finalists" not in alone.summary.split("(")[1]


def test_a_re_measured_config_is_one_finalist_and_the_baseline_keeps_its_number() -> None:
    """A space searched to the end re-measures its best points: config A measured as trials 1 and 3 filled two of the
    two finalist slots, so the stage relaunched A against itself and never the runner-up config; the baseline's
    config re-measured as trial 4 was relaunched twice, once as a leader and once as the baseline."""
    a1, a3 = trial(1, 1000.0), replace(trial(3, 1010.0), params={"x": 1})
    records = [trial(0, 700.0), a1, trial(2, 900.0), a3]
    assert select_finalists(records, KEY, "maximize", 2) == (3, 2)
    assert stage_finalists(records, KEY, "maximize", 2, {"x": 0}) == (3, 2, 0)
    base_again = replace(trial(4, 1100.0), params={"x": 0})
    records.append(base_again)
    assert stage_finalists(records, KEY, "maximize", 2, {"x": 0}) == (0, 3)


def test_the_only_clean_finalist_with_a_failed_relaunch_is_not_said_to_relaunch_cleanly() -> None:
    """Every finalist had a failed relaunch and one had a clean one too: it wins, and the summary said it 'relaunched
    cleanly' though it failed one relaunch of two."""
    trials = trials_of(trial(1, 1000.0), trial(2, 900.0))
    rs = runs(1, {1: [1000.0, 1010.0], 2: [900.0, 905.0]})
    failed = [replace(r, record=replace(trial(r.repeats, None), trial_id=r.record.trial_id)) for r in rs]
    d = decide(trials, [failed[0], rs[1], failed[2], failed[3]], OBJ)
    assert (d.method, d.winner) == ("single", 1)
    assert "relaunched cleanly (1 of its 2 relaunches)" in d.summary


def test_finalists_only_says_why_no_finalist_is_relaunched(tmp_path: Path) -> None:
    """--finalists-only on a study without a feasible trial relaunched nothing and said nothing of it: the user who
    asked for a finalist stage saw the summary table alone."""
    import optuna

    from autotune.progress.console import Console
    from autotune.search import resolve
    from autotune.study.driver import StudyDriver
    from autotune.trial.store import StudyStore

    _, spec = resolve(["--space", "smoke", "--trials", "1"])
    StudyStore(tmp_path / spec.name).append(replace(trial(0, None), study=spec.name, params=dict(spec.baseline or {})))
    # the study's Optuna database holds the trial, as after a search
    url = f"sqlite:///{tmp_path / spec.name / 'study.db'}"
    optuna.create_study(study_name=spec.name, storage=url, direction="maximize").add_trial(
        optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL)
    )
    said: list[str] = []
    console = Console()
    console.say = said.append  # type: ignore[method-assign]
    assert StudyDriver(spec, results_dir=tmp_path, finalists_only=True, console=console).run() == 3
    assert any("--finalists-only: no finalist to relaunch: no feasible trial" in s for s in said), said
