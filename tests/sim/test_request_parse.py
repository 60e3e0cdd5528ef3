"""The simulated server's request parsing, shared by /generate and the OpenAI endpoints (autotune.sim.request_parse)."""

from __future__ import annotations

import pytest

from autotune.sim.request_parse import Generation, context_error, parse_generate, parse_openai, token_ids_length


def test_generate_takes_text_or_one_list_of_token_ids() -> None:
    assert parse_generate({"text": "x" * 40, "sampling_params": {"max_new_tokens": 8}}, 100) == Generation(10, 8, False)
    assert parse_generate({"input_ids": [1, 2, 3], "stream": True}, 1000) == Generation(3, 128, True)
    assert parse_generate({"input_ids": [], "sampling_params": {"max_new_tokens": 0}}, 100) == Generation(1, 1, False)
    assert "batched requests" in str(parse_generate({"input_ids": [[1, 2], [3]]}, 100))
    assert "text or input_ids" in str(parse_generate({}, 100))
    assert "non-negative integer" in str(parse_generate({"text": "a", "sampling_params": {"max_new_tokens": -1}}, 100))
    too_long = parse_generate({"text": "abcd", "sampling_params": {"max_new_tokens": 100}}, 100)
    assert too_long == context_error(1, 100, 100) and "maximum context length of 100 tokens" in str(too_long)


def test_openai_bodies_count_the_prompt_and_check_the_budget() -> None:
    assert parse_openai({"prompt": "abcdefgh", "max_tokens": 4}, chat=False, context_len=100) == Generation(2, 4, False)
    assert parse_openai({"prompt": ["abcd"]}, chat=False, context_len=100) == Generation(1, 16, False)
    assert parse_openai({"prompt": [5, 6, 7], "stream": True}, chat=False, context_len=100) == Generation(3, 16, True)
    chat = parse_openai(
        {"messages": [{"role": "user", "content": "abcd"}], "max_completion_tokens": 3}, chat=True, context_len=100
    )
    assert chat == Generation(1 + 4, 3, False)  # 4 tokens of chat template per message
    for body, chat_, text in [
        ({"prompt": []}, False, "prompt must be"),
        ({"prompt": ["a", "b"]}, False, "prompt must be"),
        ({"messages": []}, True, "messages must be a non-empty list"),
        ({"prompt": "a", "max_tokens": -1}, False, "max_tokens must be a positive integer"),
        ({"prompt": "a", "max_tokens": 200}, False, "maximum context length is 100 tokens"),
    ]:
        assert text in str(parse_openai(body, chat=chat_, context_len=100)), body


@pytest.mark.parametrize(("ids", "n"), [([1, 2], 2), ([], 0), ([True], None), ([1, "a"], None), ("12", None)])
def test_token_ids_are_one_flat_list_of_integers(ids: object, n: int | None) -> None:
    assert token_ids_length(ids) == n


def test_chat_content_parts_count_their_text_not_their_json() -> None:
    """OpenAI's content parts (``[{"type": "text", "text": ...}]``) were counted as the list's Python repr."""
    parts = [{"type": "text", "text": "abcd"}, {"type": "text", "text": "efgh"}]
    as_parts = parse_openai({"messages": [{"role": "user", "content": parts}]}, chat=True, context_len=1000)
    as_text = parse_openai({"messages": [{"role": "user", "content": "abcdefgh"}]}, chat=True, context_len=1000)
    assert as_parts == as_text == Generation(2 + 4, 128, False)
    no_content = parse_openai({"messages": [{"role": "assistant", "content": None}]}, chat=True, context_len=1000)
    assert no_content == Generation(1 + 4, 128, False)


def test_n_other_than_one_is_refused_not_answered_with_one_choice() -> None:
    """SGLang answers n choices; the simulator answered one (and usage for one) without a word."""
    assert parse_openai({"prompt": "ab", "n": 1}, chat=False, context_len=100) == Generation(1, 16, False)
    for chat, body in ((False, {"prompt": "ab", "n": 2}), (True, {"messages": [{"content": "ab"}], "n": 3})):
        assert "one choice per request (n=1)" in str(parse_openai(body, chat=chat, context_len=1000))


def test_an_explicit_max_tokens_of_zero_is_checked_not_replaced_by_the_default() -> None:
    """``max_tokens: 0`` ran as 16 (completions) or 128 (chat) tokens."""
    for chat, body in (
        (False, {"prompt": "ab", "max_tokens": 0}),
        (True, {"messages": [{"content": "ab"}], "max_tokens": 0}),
        (True, {"messages": [{"content": "ab"}], "max_completion_tokens": 0, "max_tokens": 5}),
    ):
        assert "max_tokens must be a positive integer, got 0" in str(parse_openai(body, chat=chat, context_len=1000))
    chat = parse_openai(
        {"messages": [{"content": "ab"}], "max_completion_tokens": None, "max_tokens": 5}, chat=True, context_len=1000
    )
    assert chat == Generation(1 + 4, 5, False)
