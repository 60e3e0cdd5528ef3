"""Token counting: the simulator's stated rule without a tokenizer, the model's tokenizer when one loads."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from autotune.bench.workloads.tokens import RULE, TokenCounter, token_counter


class FakeTokenizer:
    """Whitespace tokens; ids are word lengths (enough to check that the counter uses the tokenizer)."""

    vocab_size = 50

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [len(w) for w in text.split()]

    def decode(self, ids: list[int]) -> str:
        return " ".join("x" * (i % 7 + 1) for i in ids)


def test_the_rule_without_a_tokenizer(tmp_path: Path) -> None:
    counter = token_counter(None)
    assert counter.rule == RULE
    assert [counter.count(t) for t in ("", "abc", "abcd", "abcde")] == [1, 1, 1, 2]
    assert token_counter(str(tmp_path / "no-such-model")).rule == RULE  # not a local folder: the rule
    text = counter.random_text(np.random.default_rng(0), 37)
    assert counter.count(text) == 37


def test_the_models_tokenizer_when_given() -> None:
    counter = TokenCounter(FakeTokenizer(), "/models/m")
    assert counter.rule == "tokenizer of /models/m"
    assert counter.count("one two three") == 3
    text = counter.random_text(np.random.default_rng(1), 12)
    assert counter.count(text) == 12
