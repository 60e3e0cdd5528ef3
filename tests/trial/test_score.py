from __future__ import annotations

from autotune.bench.types import BenchResult, Dist, LevelSummary
from autotune.space import Constraint, Objective
from autotune.trial.score import UNMEASURED_VIOLATION, failed_score, score


def level(c: int, tput: float, ttft_p99: float | None) -> LevelSummary:
    d = Dist(mean=1, median=1, p90=1, p99=ttft_p99, count=4) if ttft_p99 is not None else None
    return LevelSummary(
        concurrency=c,
        requests=4,
        failed=0,
        duration_s=1,
        output_tok_per_s=tput,
        request_per_s=1,
        input_tok_per_s=1,
        ttft_ms=d,
        itl_ms=None,
        tpot_ms=None,
        e2e_ms=None,
        accept_length=None,
    )


def test_objectives_and_constraints() -> None:
    res = BenchResult(levels=(level(1, 100, 10), level(32, 3000, 900)))
    objs = [Objective("output_tok_per_s", "max", "maximize")]
    s = score(res, objs, [Constraint("ttft_ms.p99", "max", max=500, min=None)])
    assert s.objectives == {"output_tok_per_s@max": 3000}
    assert s.constraints == {"ttft_ms.p99@max": 400} and not s.feasible
    s2 = score(res, objs, [Constraint("ttft_ms.p99", 1, max=500, min=None)])
    assert s2.constraints["ttft_ms.p99@1"] == -490 and s2.feasible


def test_unmeasured_metric_violates() -> None:
    res = BenchResult(levels=(level(1, 100, None),))
    s = score(res, [Objective("output_tok_per_s", 1, "maximize")], [Constraint("ttft_ms.p99", 1, max=1, min=None)])
    assert s.constraints["ttft_ms.p99@1"] == UNMEASURED_VIOLATION and not s.feasible


def test_failed_score_is_worst() -> None:
    s = failed_score([Objective("output_tok_per_s", "max", "maximize"), Objective("tpot_ms.median", 1, "minimize")], [])
    assert s.objectives["output_tok_per_s@max"] == 0.0 and s.objectives["tpot_ms.median@1"] > 1e9
    assert not s.feasible


def test_failed_requests_at_a_judged_level_make_the_trial_infeasible() -> None:
    """A level's figures are those of the requests that survived: a config whose slow requests timed out can show a
    p99 TTFT inside its bound. Failed requests at a level an objective or constraint is measured at make the trial
    infeasible (the report's comparisons and per-load table already leave such a level out); a failure at another
    level does not."""
    from dataclasses import replace as _replace

    res = BenchResult(levels=(level(1, 100, 10), _replace(level(32, 3000, 300), failed=5)))
    objs = [Objective("output_tok_per_s", "max", "maximize")]
    s = score(res, objs, [Constraint("ttft_ms.p99", "max", max=500, min=None)])
    assert s.constraints == {"ttft_ms.p99@max": -200, "failed_requests": 5.0} and not s.feasible
    low = score(res, [Objective("output_tok_per_s", 1, "maximize")], [Constraint("ttft_ms.p99", 1, max=500, min=None)])
    assert "failed_requests" not in low.constraints and low.feasible
