"""Multi-turn: each turn carries the previous turns and answers; turns and think time as configured."""

from __future__ import annotations

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import build_requests, build_units, filter_counts
from autotune.bench.workloads.summary import traffic_stats


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
