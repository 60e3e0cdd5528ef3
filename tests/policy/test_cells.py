"""The new-cells set-aside: settings a launch tried (the memory fraction aside) are not tried again while some are not,
and the rule stands down when nothing else is left to launch."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotune.core.failures import FailureKind
from autotune.policy.base import Rules, Told, params_key
from autotune.policy.cells import NewCells
from autotune.policy.defaults import default_rules
from autotune.space import load_study
from autotune.study.optuna_study import open_study
from autotune.study.searcher import OptunaStudySearcher
from autotune.trial.records import TrialOutcome, TrialRecord

SPACE = """
study: {name: cells, engine: sim, trials: 6, sampler: random, seed: 1}
sim: {profile: h200-llama-1b}
load_levels: [1]
params:
  cpb: {flag: chunked-prefill-size, type: categorical, choices: [1024, 2048]}
  mem: {flag: mem-fraction-static, type: float, low: 0.80, high: 0.82, round: 2}
"""
NCCL_LIKE = SPACE.split("  mem:")[0]  # the same space without a real-valued parameter


def _spec(tmp_path: Path, text: str = SPACE):  # type: ignore[no-untyped-def]
    (tmp_path / "s.yaml").write_text(text)
    return load_study(tmp_path / "s.yaml")


def _record(spec, params: dict) -> TrialRecord:  # type: ignore[no-untyped-def]
    return TrialRecord(
        study=spec.name, trial_id="t", number=0, params=params, flags={}, env={}, argv=[],
        outcome=TrialOutcome.COMPLETE,
    )  # fmt: skip


def test_a_cell_a_completed_launch_holds_is_set_aside_until_every_cell_is_held(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    rule = NewCells(spec)
    assert rule.cells == 2  # cpb 1024 and 2048; the memory fraction is not part of a cell
    a, a2, b = {"cpb": 1024, "mem": 0.80}, {"cpb": 1024, "mem": 0.82}, {"cpb": 2048, "mem": 0.81}
    rule.observe(a, _record(spec, a), Told(0, [0.0], {}, FailureKind.OOM_AT_LAUNCH))  # a failed launch holds nothing
    assert rule.set_aside(a2, []) is None
    rule.observe(a, _record(spec, a), Told(0, [1.0], {}))
    assert rule.set_aside(a2, []) is not None and rule.set_aside(b, []) is None
    # a running launch holds nothing: with one cell left, parallel slots would otherwise stand the rule down
    assert rule.set_aside({"cpb": 2048, "mem": 0.80}, [params_key(b)]) is None
    rule.restore(b, Told(1, [1.0], {}))  # a resumed study's launches hold their cells too
    assert rule.set_aside(a2, []) is None  # every cell is held: nothing is set aside
    assert NewCells(_spec(tmp_path, NCCL_LIKE)).cells == 0  # no real-valued parameter: the rule is off


def test_the_rule_stands_down_when_only_cells_that_cannot_be_launched_are_left(tmp_path: Path) -> None:
    """cpb 2048 is set aside by another rule, so once cpb 1024 is held nothing passes both: the proposer relaxes the
    rule and launches cpb 1024 at another memory fraction instead of calling the space exhausted."""
    from autotune.policy.base import Rule

    class NoBig(Rule):
        name = "no-big"

        def set_aside(self, params, running):  # type: ignore[no-untyped-def]
            return "too big" if params["cpb"] == 2048 else None

    spec = _spec(tmp_path)
    rules = list(default_rules(spec, sizes=False))
    assert [r.name for r in rules[:2]] == ["repeats", "new-cells"]
    s = OptunaStudySearcher(
        spec,
        open_study(spec, None),
        budget=10,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("no missing record expected"),
        rules=Rules([*rules, NoBig()]),
    )
    launched = []
    for tid in ("a", "b", "c"):
        cfg = s.suggest(tid)
        launched.append(cfg["params"])
        rec = replace(
            _record(spec, cfg["params"]), number=cfg["number"], trial_id=tid, objectives={"output_tok_per_s@max": 1.0}
        )
        s.on_trial_complete(tid, s.inbox.report(tid, rec.to_json()))
    assert [p["cpb"] for p in launched] == [1024, 1024, 1024]
    assert len({p["mem"] for p in launched}) == 3 and not s.proposer.exhausted
    assert rules[1].cells == 0  # relaxed: it sets nothing aside from then on
