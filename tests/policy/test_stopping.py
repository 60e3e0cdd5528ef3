"""The stopping rule: launches without an improvement beyond the incumbent's noise band end the search."""

from __future__ import annotations

from dataclasses import replace

from autotune.bench.metrics import aggregate_windows
from autotune.bench.types import BenchResult, LevelSummary
from autotune.policy.stopping import check
from autotune.space import Objective, StopRule
from autotune.trial.records import FailureKind, TrialOutcome, TrialRecord

OBJ = Objective("output_tok_per_s", "max", "maximize")
KEY = OBJ.key


def level(tput: float) -> LevelSummary:
    return LevelSummary(
        concurrency=8,
        requests=4,
        failed=0,
        duration_s=1.0,
        output_tok_per_s=tput,
        request_per_s=1.0,
        input_tok_per_s=1.0,
        ttft_ms=None,
        itl_ms=None,
        tpot_ms=None,
        e2e_ms=None,
        accept_length=None,
    )


def rec(
    number: int,
    windows: tuple[float, ...] | None,
    *,
    feasible: bool = True,
    outcome: TrialOutcome = TrialOutcome.COMPLETE,
) -> TrialRecord:
    bench = None
    objectives = {}
    if windows is not None:
        lv = aggregate_windows(8, [level(w) for w in windows], "max_windows")
        bench = BenchResult(levels=(lv,))
        objectives = {KEY: lv.output_tok_per_s}
    failure = (
        None
        if outcome is TrialOutcome.COMPLETE
        else (FailureKind.INVALID_CONFIG if outcome is TrialOutcome.INVALID else FailureKind.OOM_AT_LAUNCH)
    )
    return TrialRecord(
        study="s",
        trial_id=f"t{number}",
        number=number,
        params={},
        flags={},
        env={},
        argv=[],
        outcome=outcome,
        failure=failure,
        bench=bench,
        objectives=objectives,
        feasible=feasible and outcome is TrialOutcome.COMPLETE,
    )


RULE = StopRule(no_improvement_launches=3)


def test_improvements_within_the_noise_band_do_not_count() -> None:
    # incumbent 1000 +- (95% interval of 990, 1010: half-width 12.706 * 14.14 / sqrt 2 = 127) -> band up to 1127
    records = [rec(0, (990.0, 1010.0)), rec(1, (1100.0, 1100.0)), rec(2, (1050.0, 1060.0))]
    c = check(records, OBJ, RULE)
    assert (c.stop, c.since_improvement, c.incumbent) == (False, 2, 1)  # 1 is better but inside 0's band
    c = check([*records, rec(3, None, outcome=TrialOutcome.FAILED)], OBJ, RULE)
    assert c.stop and c.since_improvement == 3 and "stop_when" in c.reason and "trial 1" in c.reason


def test_an_improvement_beyond_the_band_resets_the_count() -> None:
    records = [
        rec(0, (990.0, 1010.0)),
        rec(1, (900.0, 910.0)),
        rec(2, (900.0, 910.0)),
        rec(3, (1200.0, 1210.0)),
        rec(4, (1000.0, 1000.0)),
    ]
    c = check(records, OBJ, RULE)
    assert (c.stop, c.since_improvement, c.incumbent) == (False, 1, 3)


def test_invalid_trials_are_not_launches_and_infeasible_ones_are() -> None:
    records = [
        rec(0, (1000.0, 1000.0)),
        rec(1, None, outcome=TrialOutcome.INVALID),
        rec(2, (5000.0, 5000.0), feasible=False),
        rec(3, None, outcome=TrialOutcome.INVALID),
    ]
    c = check(records, OBJ, RULE)
    assert (c.stop, c.since_improvement) == (False, 1)


def test_minimize_and_no_feasible_trial() -> None:
    obj = Objective("output_tok_per_s", "max", "minimize")
    records = [rec(0, (1000.0, 1000.0)), rec(1, (900.0, 901.0))]
    assert check(records, obj, RULE).incumbent == 1  # lower is better and beyond a zero-width band
    failing = [rec(i, None, outcome=TrialOutcome.FAILED) for i in range(3)]
    c = check(failing, OBJ, RULE)
    assert c.stop and "no feasible trial yet" in c.reason
    assert not check(failing[:2], OBJ, RULE).stop
    assert RULE.model_copy().no_improvement_launches == 3 and RULE == StopRule(no_improvement_launches=3)


def test_driver_applies_the_rule_and_says_why(tmp_path) -> None:  # noqa: ANN001
    import json

    from autotune.search import resolve
    from autotune.study.driver import StudyDriver

    spec = resolve(["--space", "smoke"])[1]
    spec = replace(spec, stop_when=StopRule(no_improvement_launches=2))
    driver = StudyDriver(spec, results_dir=tmp_path)
    driver.store.ensure()

    class Searcher:
        reason = ""
        budget, suggested = 12, 4  # the fourth trial is running
        proposer = type("Proposer", (), {"deferred": [{"x": 1}]})()  # a seed point launched last, after the stop

        def finish(self, reason: str) -> None:
            self.reason = reason

    fake = Searcher()
    driver._searcher = fake  # type: ignore[assignment]
    driver.console.study_started(12, 1)
    key = spec.objectives[0].key
    for i, windows in enumerate([(1000.0, 1001.0), (999.0, 1000.0)]):
        r = rec(i, windows)
        driver._on_record(replace(r, objectives={key: r.objectives[KEY]}), "")
    assert not driver.stop_rule_reason and not fake.reason
    driver._on_record(rec(2, None, outcome=TrialOutcome.FAILED), "")
    assert driver.stop_rule_reason.startswith("stopped early by study.stop_when: 2 launches") and fake.reason
    assert json.loads((driver.store.root / "study.json").read_text())["stopped_early"] == driver.stop_rule_reason
    # the console's N is what this run still starts: the four suggested and the deferred seed, not the budget of 12
    assert driver.console.planned == 5 and driver.console.finished == 3
