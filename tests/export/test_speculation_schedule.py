"""The best speculative setting per load level, from known per-level results."""

from __future__ import annotations

import json

from autotune.export.schedule import schedule_document, schedule_table, speculation_schedule
from tests.export.conftest import REAL, make_record

LEVELS = (1, 8, 32, 128)
SMALL = {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 4}
LARGE = {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 12}


def records() -> list:
    return [
        make_record(0, tputs={1: 100, 8: 700, 32: 2400, 128: 8000}, engine=REAL),  # off
        make_record(1, tputs={1: 180, 8: 900, 32: 2000, 128: 3000}, flags=LARGE, accept=2.4, engine=REAL),
        make_record(2, tputs={1: 150, 8: 1000, 32: 2500, 128: 4000}, flags=SMALL, accept=1.8, engine=REAL),
    ]


def test_each_level_runs_the_fastest_choice_and_off_where_speculation_loses() -> None:
    s = speculation_schedule(records(), LEVELS)
    assert [(r.concurrency, r.choice, r.speculative) for r in s.levels] == [
        (1, 1, True),
        (8, 2, True),
        (32, 2, True),
        (128, 0, False),
    ]
    assert [(r.low, r.high, r.trial, r.speculative) for r in s.ranges] == [
        (1, 1, 1, True),
        (8, 32, 2, True),
        (128, 128, 0, False),
    ]
    assert s.ranges[1].flags == SMALL
    row = s.levels[0]
    assert row.ratio == 1.8 and row.spec_accept_length == 2.4
    assert "speculation is chosen at load level(s) 1, 8, 32" in s.note
    assert "no trial ran adaptive speculation" in s.note


def test_a_config_the_gate_blocked_is_never_scheduled() -> None:
    s = speculation_schedule(records(), LEVELS, blocked={1})
    assert [r.choice for r in s.levels] == [2, 2, 2, 0]
    assert s.blocked == (1,)


def test_adaptive_is_compared_with_the_best_static_setting_at_every_level() -> None:
    adaptive = make_record(
        3,
        tputs={1: 200, 8: 800, 32: 2300, 128: 3500},
        flags={"speculative-algorithm": "EAGLE3", "speculative-adaptive": True},
        engine=REAL,
    )
    s = speculation_schedule([*records(), adaptive], LEVELS)
    assert s.any_adaptive
    assert [(r.adaptive_tok_per_s, r.static_tok_per_s) for r in s.levels] == [
        (200, 180),
        (800, 1000),
        (2300, 2500),
        (3500, 4000),
    ]
    assert s.levels[0].choice == 3


def test_the_document_and_table_are_machine_and_human_readable() -> None:
    s = speculation_schedule(records(), LEVELS)
    doc = json.loads(json.dumps(schedule_document(s)))
    assert doc["ranges"][-1] == {"from_level": 128, "to_level": 128, "trial": 0, "speculative": False, "flags": {}}
    table = schedule_table(s)
    assert table[2].startswith("| 1 | speculate: trial 1 |") and "off: trial 0" in table[-1]


def test_speculation_that_never_wins_is_off_everywhere() -> None:
    slow = make_record(1, tputs={1: 50, 8: 300, 32: 900, 128: 1000}, flags=LARGE, engine=REAL)
    s = speculation_schedule([records()[0], slow], LEVELS)
    assert all(not r.speculative for r in s.levels)
    assert "off everywhere" in s.note and len(s.ranges) == 1


def test_the_schedule_leaves_out_benchmark_only_settings(tmp_path) -> None:
    """A range's flags are what to run at those levels; they used to carry the trial's benchmark-only settings
    (``--speculative-draft-load-format dummy``: random drafter weights; the study's ``server.study_only``), which the
    export leaves out of launch.sh and serve_config.yaml, into speculation_schedule.json and report.md."""
    from autotune.export import export_study
    from tests.export.conftest import OBJECTIVES

    flags = {**SMALL, "speculative-draft-load-format": "dummy", "speculative-num-steps": 3}
    recs = [records()[0], make_record(2, tputs={1: 150, 8: 1000, 32: 2500, 128: 9000}, flags=flags, engine=REAL)]
    out = export_study(
        tmp_path,
        study_name="s",
        objectives=OBJECTIVES,
        records=recs,
        load_levels=LEVELS,
        study_only={"speculative-num-steps": ""},
    )
    (only,) = json.loads((out.best_dir / "speculation_schedule.json").read_text())["ranges"]
    assert only["flags"] == SMALL
    schedule = next(line for line in out.report.read_text().splitlines() if line.startswith("Schedule:"))
    assert "dummy" not in schedule and "speculative-num-steps" not in schedule


def test_a_range_carries_the_running_cap_and_graph_ceiling_its_trial_ran_with() -> None:
    """Under ``speculative_caps: tie`` a speculative trial runs with ``--max-running-requests`` and the CUDA-graph
    ceiling set together; a range listed only its ``speculative-*`` flags, so copying them brought back SGLang's
    speculative cap of 48 (the user story's bug) for a setting measured without it."""
    caps = {"max-running-requests": 128, "cuda-graph-max-bs-decode": 128}
    recs = records()
    recs[2] = make_record(
        2, tputs={1: 150, 8: 1000, 32: 2500, 128: 4000}, flags={**SMALL, **caps, "page-size": 16}, engine=REAL
    )
    s = speculation_schedule(recs, LEVELS)
    assert s.ranges[1].trial == 2 and s.ranges[1].flags == {**SMALL, **caps}
    assert s.ranges[0].flags == LARGE  # no cap set: none listed
