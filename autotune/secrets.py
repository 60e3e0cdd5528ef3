"""Secret environment values: which names are secret, and their redaction in everything autotune writes.

A variable is secret when its name matches ``SECRET_NAME`` (any of TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL,
AUTH, case-insensitive, e.g. ``HF_TOKEN``, ``OPENAI_API_KEY``, ``AWS_SECRET_ACCESS_KEY``) or is listed in the study's
``server.secret_env``. The server still gets the real value at launch; records, logs, ``study.json``, Ray Tune's
folder and the exports get ``REDACTED`` instead, and ``launch.sh`` reads the value from the caller's environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
REDACTED = "<redacted>"
# Only values that look like credentials are searched for in free text: a short or plain-word value ("0", "token" of
# RAY_AUTH_MODE, "bearer") also occurs in ordinary text (``--speculative-num-draft-tokens``) and would be falsified.
_MIN_VALUE_LEN = 8
_PLAIN_WORD = re.compile(r"[A-Za-z]{1,15}")


def _searchable(value: str) -> bool:
    return len(value) >= _MIN_VALUE_LEN and not _PLAIN_WORD.fullmatch(value)


def is_secret(name: str, extra: Iterable[str] = ()) -> bool:
    return bool(SECRET_NAME.search(name)) or name in set(extra)


# A flag is secret when one of its dash-separated words is a credential word (``--api-key``, ``--hf-token``,
# ``--admin-password``): matched by word, not by substring, so ``--speculative-num-draft-tokens`` and
# ``--tokenizer-path`` stay readable (a substring match redacted the draft-token count in records and exports).
SECRET_FLAG_WORDS = frozenset({"token", "key", "secret", "password", "passwd", "credential", "credentials", "auth"})


def is_secret_flag(name: str, extra: Iterable[str] = ()) -> bool:
    return bool(SECRET_FLAG_WORDS & set(name.lower().lstrip("-").split("-"))) or name in set(extra)


def redact_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """``env`` with every secret value replaced by ``REDACTED``."""
    names = set(extra)
    return {k: (REDACTED if is_secret(k, names) else v) for k, v in env.items()}


def secret_values(env: Mapping[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The secret values of ``env`` worth searching for in free text, longest first."""
    names = set(extra)
    vals = {str(v) for k, v in env.items() if is_secret(k, names) and v and v != REDACTED and _searchable(str(v))}
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each value replaced by ``REDACTED``."""
    for v in values:
        if v:
            text = text.replace(v, REDACTED)
    return text


def has_secrets(env: Mapping[str, str], extra: Iterable[str] = ()) -> bool:
    names = set(extra)
    return any(is_secret(k, names) for k in env)
