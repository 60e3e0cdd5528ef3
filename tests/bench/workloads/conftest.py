"""Small ShareGPT and trace files for the workload tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def conversation(*turns: str) -> dict[str, object]:
    return {
        "id": "x",
        "conversations": [{"from": "human" if i % 2 == 0 else "gpt", "value": t} for i, t in enumerate(turns)],
    }


@pytest.fixture
def sharegpt_file(tmp_path: Path) -> str:
    convs = [conversation(f"question number {i} " * 4, f"answer number {i} " * 8) for i in range(40)]
    convs += [
        conversation(),  # empty
        conversation("only one turn"),  # empty: no answer
        conversation("hi", "a reasonably long answer " * 3),  # prompt of 1 token by the rule: too short
        conversation("a reasonably long question " * 3, "ok"),  # output of 1 token: too short
        conversation("long " * 800, "answer " * 10),  # 1,000 tokens of prompt: over a 512 context
    ]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    return str(path)


@pytest.fixture
def multi_turn_file(tmp_path: Path) -> str:
    convs = [conversation(*(f"turn {k} of conversation {i} " * 3 for k in range(6))) for i in range(12)]
    path = tmp_path / "multi.json"
    path.write_text(json.dumps(convs), encoding="utf-8")
    return str(path)


def write_trace(tmp_path: Path, rows: list[object], name: str = "trace.jsonl") -> str:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return str(path)
