"""Multi-turn: each turn carries the previous turns and answers; turns and think time as configured."""

from __future__ import annotations

import json
from pathlib import Path

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import build_requests, build_units, filter_counts
from autotune.bench.workloads.summary import traffic_stats
from tests.bench.workloads.conftest import conversation


def test_each_turn_extends_the_previous_turns_prompt(multi_turn_file: str) -> None:
    spec = WorkloadSpec(kind="multi-turn", path=multi_turn_file, turns=3, think_time_s=2.5)
    units = build_units(spec, 4)
    for unit in units:
        assert len(unit) == 3
        assert [t.think_s for t in unit] == [0.0, 2.5, 2.5]
        for prev, nxt in zip(unit, unit[1:], strict=False):
            assert nxt.text.startswith(prev.text)  # the history (with the previous answer) is a prefix
            assert nxt.prompt_len > prev.prompt_len
        assert unit[-1].text.endswith("Assistant:")


def test_all_turns_and_determinism_and_no_repeats(multi_turn_file: str) -> None:
    spec = WorkloadSpec(kind="multi-turn", path=multi_turn_file, seed=2)
    units = build_units(spec, 6)
    assert {len(u) for u in units} == {3}  # six entries a conversation: three turns
    assert build_units(spec, 2, offset=4) == units[4:]
    later = build_units(spec, 6, offset=6)
    assert not {u[0].text for u in units} & {u[0].text for u in later}


def test_turns_over_the_context_end_the_conversation_and_are_counted(multi_turn_file: str) -> None:
    spec = WorkloadSpec(kind="multi-turn", path=multi_turn_file, context_len=90)
    units = build_units(spec, 12)
    assert all(1 <= len(u) < 3 for u in units)
    counts = filter_counts(spec)
    assert counts is not None and sum(v for k, v in counts.dropped.items() if k.startswith("turns_cut")) == 12


def test_prefix_reuse_is_high_for_multi_turn_and_zero_for_distinct_first_turns(multi_turn_file: str) -> None:
    turns = traffic_stats(build_requests(WorkloadSpec(kind="multi-turn", path=multi_turn_file), 12))
    firsts = traffic_stats(build_requests(WorkloadSpec(kind="multi-turn", path=multi_turn_file, turns=1), 12))
    assert turns.prefix_reuse > 0.3
    assert firsts.prefix_reuse == 0.0


def test_an_empty_user_turn_is_too_short_as_in_sharegpt(tmp_path: Path) -> None:
    # ShareGPT has empty user turns (139 first and 230 later ones in the package's copy). The templated prompt
    # "User: \nAssistant:" is 5 tokens by the rule, so they passed the too_short filter and were sent as turns
    # with no user text; sharegpt drops them. Now: an empty first turn drops the conversation, a later one ends it.
    convs = [
        conversation("", "an answer of a few words", "a question of a few words", "an answer of a few words"),
        conversation("a question of a few words", "an answer of a few words", "", "an answer of a few words"),
        conversation("a question of a few words", "an answer of a few words"),
    ]
    path = tmp_path / "c.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    spec = WorkloadSpec(kind="multi-turn", path=str(path))
    units = build_units(spec, 2)
    assert sorted(len(u) for u in units) == [1, 1]
    assert all("User: \n" not in t.text for u in units for t in u if t.text is not None)
    counts = filter_counts(spec)
    assert counts is not None and counts.kept == 2
    assert counts.dropped == {"too_short": 1, "turns_cut_too_short": 1}
