"""Workloads: seeded synthetic requests and JSONL files."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from autotune.bench.types import WorkloadSpec
from autotune.bench.workloads import BenchRequest, build_requests
from autotune.bench.workloads.random_ids import MIN_TOKEN_ID
from autotune.core.errors import BenchError


def test_synthetic_is_deterministic_and_batch_independent() -> None:
    spec = WorkloadSpec(input_len=64, output_len=32, range_ratio=0.5, seed=7, vocab_size=1000)
    whole = build_requests(spec, 20)
    assert whole == build_requests(spec, 20)
    assert whole == build_requests(spec, 7) + build_requests(spec, 13, offset=7)
    assert build_requests(dataclasses.replace(spec, seed=8), 20) != whole
    assert len({r.input_ids for r in whole}) == 20  # no prompt repeats


def test_synthetic_lengths_and_ids_in_range() -> None:
    spec = WorkloadSpec(input_len=100, output_len=40, range_ratio=0.5, vocab_size=50)
    reqs = build_requests(spec, 300)
    in_lens = {len(r.input_ids or ()) for r in reqs}
    out_lens = {r.max_new_tokens for r in reqs}
    assert min(in_lens) >= 50 and max(in_lens) <= 100 and len(in_lens) > 20
    assert min(out_lens) >= 20 and max(out_lens) <= 40
    ids = {t for r in reqs for t in r.input_ids or ()}
    assert min(ids) == MIN_TOKEN_ID and max(ids) == 49
    assert all(r.text is None for r in reqs)


def test_range_ratio_zero_gives_fixed_lengths() -> None:
    reqs = build_requests(WorkloadSpec(input_len=128, output_len=256), 10)
    assert {len(r.input_ids or ()) for r in reqs} == {128} and {r.max_new_tokens for r in reqs} == {256}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"input_len": 0}, "input_len >= 1"),
        ({"range_ratio": 1.5}, "range_ratio must be in"),
        ({"vocab_size": 5}, "vocab_size must be > 10"),
        ({"kind": "jsonl"}, "needs a path"),
    ],
)
def test_bad_specs(change: dict[str, object], match: str) -> None:
    with pytest.raises(BenchError, match=match):
        build_requests(dataclasses.replace(WorkloadSpec(), **change), 1)


def _write(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_jsonl_rows_are_read_and_cycled(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        [json.dumps({"prompt": "hello"}), "", json.dumps({"input_ids": [11, 12, 13], "max_new_tokens": 5})],
    )
    spec = WorkloadSpec(kind="jsonl", path=path, output_len=64)
    reqs = build_requests(spec, 5)
    a = BenchRequest(input_ids=None, text="hello", max_new_tokens=64, prompt_len=2)  # 5 characters: 2 by the rule
    b = BenchRequest(input_ids=(11, 12, 13), text=None, max_new_tokens=5, prompt_len=3)
    assert reqs == [a, b, a, b, a]
    assert build_requests(spec, 2, offset=3) == [b, a]


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (['{"prompt": "ok"}', "{not json"], r"prompts\.jsonl, line 2: invalid JSON"),
        (['{"text": "x"}'], r"line 1: needs exactly one of \"prompt\""),
        (['{"prompt": "x", "input_ids": [1]}'], r"line 1: needs exactly one of"),
        (["[1, 2]"], r"line 1: expected a JSON object"),
        (['{"prompt": 3}'], r'line 1: "prompt" must be a non-empty string'),
        (['{"input_ids": [1, "a"]}'], r'line 1: "input_ids" must be a non-empty list'),
        (['{"prompt": "x", "max_new_tokens": 0}'], r'line 1: "max_new_tokens" must be a positive integer'),
        (["", "  "], r"no rows"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path: Path, lines: list[str], match: str) -> None:
    spec = WorkloadSpec(kind="jsonl", path=_write(tmp_path, lines))
    with pytest.raises(BenchError, match=match):
        build_requests(spec, 1)


def test_jsonl_missing_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.jsonl")
    with pytest.raises(BenchError, match=r"nope\.jsonl: cannot read it"):
        build_requests(WorkloadSpec(kind="jsonl", path=missing), 1)


def test_jsonl_edit_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n', encoding="utf-8")
    spec = WorkloadSpec(kind="jsonl", path=str(path))
    assert build_requests(spec, 1)[0].text == "a"
    path.write_text('{"prompt": "bb"}\n', encoding="utf-8")
    assert build_requests(spec, 1)[0].text == "bb"


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("jsonl", '{"prompt": "hello"}\n'),
        ("trace", '{"timestamp": 0, "input_length": 8, "output_length": 4, "hash_ids": [1]}\n'),
        (
            "sharegpt",
            json.dumps([{"conversations": [{"from": "human", "value": "q " * 9}, {"from": "gpt", "value": "a " * 9}]}]),
        ),
    ],
)
def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path, kind: str, text: str) -> None:
    """Windows tools often save UTF-8 with a BOM; it was refused as "invalid JSON (Unexpected UTF-8 BOM ...)"."""
    path = tmp_path / "data.json"
    path.write_text(text, encoding="utf-8-sig")
    spec = WorkloadSpec(kind=kind, path=str(path), output_len=4, context_len=4096)
    assert len(build_requests(spec, 1)) == 1
