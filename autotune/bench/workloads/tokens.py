"""Counting and making tokens for text workloads.

With ``WorkloadSpec.tokenizer`` naming a local model folder and ``transformers`` installed, text is measured (and
random text cut) with that model's own tokenizer (``AutoTokenizer.from_pretrained(path, local_files_only=True)``).
Otherwise the *stated rule* applies, the one the simulated server counts prompts by
(``autotune.sim.streaming.prompt_tokens_of``): a text of ``c`` characters is ``max(1, ceil(c / 4))`` tokens.
``TokenCounter.rule`` names which one a workload used; records and reports carry it.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

CHARS_PER_TOKEN = 4
RULE = "chars/4 (the simulator's rule: max(1, ceil(characters / 4)))"

# Random text is drawn from these words (plain ASCII, a few characters each, so the rule and real tokenizers agree
# roughly on lengths); a seeded generator picks them.
_WORDS = tuple(
    (
        "time year people way day man thing woman life child world school state family student group country problem "
        "hand part place case week company system program question work government number night point home water "
        "room mother area money story fact month lot right study book eye job word business issue side kind head "
        "house service friend father power hour game line end member law car city community name president team "
        "minute idea kid body information back parent face others level office door health person art war history "
        "party result change morning reason research girl guy moment air teacher force education"
    ).split()
)


class TokenCounter:
    """Counts the tokens of a text, and builds random text of a given token length."""

    def __init__(self, tokenizer: Any | None = None, source: str = "") -> None:
        self._tok = tokenizer
        self.rule = f"tokenizer of {source}" if tokenizer is not None else RULE

    def count(self, text: str) -> int:
        if self._tok is None:
            return max(1, (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)
        return len(self._tok.encode(text, add_special_tokens=False))

    def random_text(self, rng: np.random.Generator, n_tokens: int) -> str:
        """Random words making ``n_tokens`` tokens (by this counter), ``n_tokens >= 1``."""
        if self._tok is None:
            words = rng.choice(len(_WORDS), size=n_tokens)  # ~5.6 characters per word with its space: > 4
            text = " ".join(_WORDS[i] for i in words)
            return text[: n_tokens * CHARS_PER_TOKEN]
        vocab = self._tok.vocab_size
        ids = rng.integers(10, vocab, size=n_tokens).tolist()
        return str(self._tok.decode(ids))


@functools.lru_cache(maxsize=4)
def token_counter(tokenizer_path: str | None) -> TokenCounter:
    """The model's tokenizer when ``tokenizer_path`` is a local folder and transformers loads it; else the rule."""
    if not tokenizer_path or not os.path.isdir(tokenizer_path):
        return TokenCounter()
    try:
        from transformers import AutoTokenizer  # optional: only where the model is
    except ImportError:
        return TokenCounter()
    try:
        tok = AutoTokenizer.from_pretrained(tokenizer_path, local_files_only=True)
    except (OSError, ValueError):
        return TokenCounter()
    return TokenCounter(tok, tokenizer_path)
