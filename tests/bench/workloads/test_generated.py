"""random, random-ids (synthetic), shared-prefix, trace and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import KIND_NAMES, build_requests, check_workload, filter_counts
from autotune.bench.workloads.summary import traffic_stats
from autotune.core.errors import BenchError
from tests.bench.workloads.conftest import write_trace


def test_registry_names_every_kind() -> None:
    assert set(KIND_NAMES) >= {
        "random-ids",
        "synthetic",
        "random",
        "jsonl",
        "sharegpt",
        "multi-turn",
        "shared-prefix",
        "trace",
    }
    with pytest.raises(BenchError, match="unknown workload kind 'nope'"):
        check_workload(WorkloadSpec(kind="nope"))


@pytest.mark.parametrize("kind", ["synthetic", "random", "shared-prefix", "sharegpt"])
def test_a_negative_seed_is_a_bench_error(kind: str) -> None:
    """NumPy takes no negative seed: --seed -1 raised a ValueError traceback from inside the run."""
    spec = WorkloadSpec(kind=kind, seed=-1)
    with pytest.raises(BenchError, match="workload seed must be an integer >= 0"):
        check_workload(spec)
    with pytest.raises(BenchError, match="workload seed"):
        build_requests(spec, 1)


def test_random_ids_keeps_the_synthetic_requests() -> None:
    a = build_requests(WorkloadSpec(kind="synthetic", input_len=16, seed=3), 4)
    b = build_requests(WorkloadSpec(kind="random-ids", input_len=16, seed=3), 4)
    assert a == b and all(r.prompt_len == 16 for r in a)


def test_random_text_has_the_drawn_length_by_the_rule() -> None:
    spec = WorkloadSpec(kind="random", input_len=100, output_len=20, range_ratio=0.5, seed=1)
    reqs = build_requests(spec, 20)
    assert all(50 <= r.prompt_len <= 100 and r.text is not None for r in reqs)
    assert all(-(-len(r.text) // 4) == r.prompt_len for r in reqs)  # type: ignore[arg-type]
    assert build_requests(spec, 5, offset=15) == reqs[15:]
    assert traffic_stats(reqs).prefix_reuse < 0.05


def test_shared_prefix_groups_share_a_system_prompt_and_cycles_do_not() -> None:
    spec = WorkloadSpec(
        kind="shared-prefix", gsp_groups=3, gsp_prompts_per_group=4, gsp_system_len=64, gsp_question_len=8, output_len=5
    )
    first, second = build_requests(spec, 12), build_requests(spec, 12, offset=12)
    systems = [r.text.split("\n")[0] for r in first]  # type: ignore[union-attr]
    assert len(set(systems)) == 3 and all(systems.count(s) == 4 for s in set(systems))
    assert not set(systems) & {r.text.split("\n")[0] for r in second}  # type: ignore[union-attr]
    assert traffic_stats(first).prefix_reuse > 0.5
    with pytest.raises(BenchError, match="gsp_groups >= 1"):
        check_workload(WorkloadSpec(kind="shared-prefix", gsp_groups=0))


def test_trace_rows_times_and_shared_blocks(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path,
        [
            {"timestamp": 1000, "input_length": 40, "output_length": 5, "hash_ids": [1, 2]},
            "",
            {"timestamp": 1500, "input_length": 30, "output_length": 6, "hash_ids": [1, 3]},
            {"timestamp": 3000, "input_length": 9000, "output_length": 6},
        ],
    )
    spec = WorkloadSpec(kind="trace", path=path, trace_block_size=16, context_len=4096)
    reqs = build_requests(spec, 4)
    assert [r.arrival_s for r in reqs[:2]] == [0.0, 0.5]
    assert [len(r.input_ids or ()) for r in reqs[:2]] == [40, 30]
    assert reqs[0].input_ids[:16] == reqs[1].input_ids[:16]  # type: ignore[index]  # hash id 1: the same block
    assert reqs[0].input_ids[16:32] != reqs[1].input_ids[16:32]  # type: ignore[index]
    # The over-context row is dropped and counted; the next cycle continues after the trace's span, new blocks.
    assert filter_counts(spec).dropped == {"over_context": 1}  # type: ignore[union-attr]
    assert reqs[2].arrival_s > 0.5 and reqs[2].input_ids[:16] != reqs[0].input_ids[:16]  # type: ignore[index]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [
                {"timestamp": 5, "input_length": 3, "output_length": 2},
                {"timestamp": 4, "input_length": 3, "output_length": 2},
            ],
            "line 2: timestamp 4 is before the previous row's 5.0; sort the trace by timestamp",
        ),
        (["{not json"], "line 1: invalid JSON"),
        ([{"timestamp": 0, "input_length": 0, "output_length": 2}], 'line 1: "input_length" must be an integer >= 1'),
        ([{"timestamp": 0, "input_length": 3, "output_length": 2, "hash_ids": ["a"]}], '"hash_ids" must be a list'),
        ([{"input_length": 3, "output_length": 2}], '"timestamp" must be a number'),
    ],
)
def test_bad_trace_rows_are_named(tmp_path: Path, rows: list[object], message: str) -> None:
    with pytest.raises(BenchError, match=message):
        check_workload(WorkloadSpec(kind="trace", path=write_trace(tmp_path, rows)))


def test_trace_without_a_path_or_file(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="needs a path"):
        check_workload(WorkloadSpec(kind="trace"))
    with pytest.raises(BenchError, match="cannot read it"):
        check_workload(WorkloadSpec(kind="trace", path=str(tmp_path / "none.jsonl")))
