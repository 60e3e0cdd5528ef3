"""Secrets: which variables and flags hold one, and their redaction in everything autotune writes.

A value is secret by declaration or by shape, never because a name merely contains a word:

- declared: the study's ``server.secret_env`` (variables) and ``server.secret_flags`` (flags, without dashes), and the
  engine's known credential flags (``KNOWN_SECRET_FLAGS``: ``--api-key``, ``--hf-token``, ...);
- a name shaped like a credential: its last word (split at ``_``, ``-``, ``.``) is one of ``SECRET_WORDS``
  (``HF_TOKEN``, ``OPENAI_API_KEY``, ``DB_PASS``, ``MYSQL_PWD``, ``api-key``); ``TOKENIZERS_PARALLELISM``,
  ``--tokenizer-path`` and ``--speculative-num-draft-tokens`` are not;
- a value shaped like a credential: a URL with a password in its userinfo (``postgresql://user:pw@host/db``), or a
  token with a known issuer's prefix (``hf_...``, ``sk-...``, ``ghp_...``, ``xoxb-...``, ``AKIA...``, a JWT).

The server still gets the real value at launch; records, logs, ``study.json``, Ray Tune's folder and the exports get
``REDACTED`` instead, ``launch.sh`` reads the value from the caller's environment, and a study with any secret keeps
its directory private (0700, files 0600).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"
SECRET_WORDS = frozenset(
    {"TOKEN", "KEY", "APIKEY", "SECRET", "PASSWORD", "PASSWD", "PASS", "PWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS"}
)
# SGLang's flags whose value is a credential (``python -m sglang.launch_server --help``), and common ones of servers.
KNOWN_SECRET_FLAGS = frozenset({"api-key", "admin-api-key", "hf-token", "ssl-keyfile-password"})
_URL_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@:\s]*:([^/@\s]+)@")
_TOKEN_SHAPES = re.compile(
    r"^(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]+)$"
)
# Only values that look like credentials are searched for in free text: a short or plain-word value ("0", "token" of
# RAY_AUTH_MODE, "bearer") also occurs in ordinary text (``--speculative-num-draft-tokens``) and would be falsified.
_MIN_VALUE_LEN = 8
_PLAIN_WORD = re.compile(r"[A-Za-z]{1,15}")


def _searchable(value: str) -> bool:
    return len(value) >= _MIN_VALUE_LEN and not _PLAIN_WORD.fullmatch(value)


def secret_name(name: str) -> bool:
    """A name shaped like a credential's: its last word is one of ``SECRET_WORDS``."""
    words = [w for w in re.split(r"[-_.\s]+", name.strip("-").upper()) if w]
    return bool(words) and words[-1] in SECRET_WORDS


def secret_value(value: Any) -> bool:
    """A value shaped like a credential: a URL with a password in its userinfo, or a known issuer's token."""
    if not isinstance(value, str):
        return False
    return bool(_URL_PASSWORD.match(value) or _TOKEN_SHAPES.match(value))


def is_secret(name: str, extra: Iterable[str] = (), *, value: Any = None) -> bool:
    """Whether ``name`` (a variable, or a flag without dashes) holding ``value`` is secret: declared (``extra``, or a
    known credential flag), or a credential by the shape of its name or its value."""
    return name in set(extra) or name.lstrip("-") in KNOWN_SECRET_FLAGS or secret_name(name) or secret_value(value)


def redact_env(env: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """``env`` with every secret value replaced by ``REDACTED``."""
    names = set(extra)
    return {k: (REDACTED if is_secret(k, names, value=v) else v) for k, v in env.items()}


def redact_flags(flags: Mapping[str, Any], extra: Iterable[str] = ()) -> dict[str, Any]:
    """``flags`` (names without dashes) with every secret value replaced by ``REDACTED`` (a bare switch stays)."""
    names = set(extra)
    return {
        k: (REDACTED if v is not None and not isinstance(v, bool) and is_secret(k, names, value=v) else v)
        for k, v in flags.items()
    }


def redact_argv(argv: Iterable[str], extra_flags: Iterable[str] = ()) -> list[str]:
    """``argv`` with the value of every secret flag (``--api-key V`` or ``--api-key=V``) replaced by ``<redacted>``,
    whatever its length (free-text search only finds values that look like credentials)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg[2:].partition("=")
        if eq and is_secret(name, extra_flags, value=value):
            out[i] = f"--{name}={REDACTED}"
        elif (
            not eq
            and i + 1 < len(out)
            and not out[i + 1].startswith("--")
            and is_secret(name, extra_flags, value=out[i + 1])
        ):
            out[i + 1] = REDACTED
    return out


def _url_passwords(values: Iterable[Any]) -> list[str]:
    """``:password@`` of each URL value with userinfo: searched in text even when the password alone is short."""
    out = []
    for v in values:
        m = _URL_PASSWORD.match(v) if isinstance(v, str) else None
        if m:
            out.append(f":{m.group(1)}@")
    return out


def secret_values(env: Mapping[str, Any], extra: Iterable[str] = ()) -> list[str]:
    """The secret values of ``env`` (variables or flags) worth searching for in free text, longest first."""
    names = set(extra)
    found = [
        str(v) for k, v in env.items() if v is not None and not isinstance(v, bool) and is_secret(k, names, value=v)
    ]
    vals = {v for v in found if v and v != REDACTED and _searchable(v)}
    vals |= {p for p in _url_passwords(found) if len(p) > 3}
    vals |= {p.strip(":@") for p in _url_passwords(found) if _searchable(p.strip(":@"))}
    return sorted(vals, key=len, reverse=True)


def redact_text(text: str, values: Iterable[str]) -> str:
    """``text`` with every occurrence of each value replaced by ``REDACTED`` (``:pw@`` keeps its ``:`` and ``@``)."""
    for v in values:
        if v:
            text = text.replace(v, f":{REDACTED}@" if v.startswith(":") and v.endswith("@") else REDACTED)
    return text


def has_secrets(env: Mapping[str, Any], extra: Iterable[str] = ()) -> bool:
    names = set(extra)
    return any(
        v == REDACTED or (v is not None and not isinstance(v, bool) and is_secret(k, names, value=v))
        for k, v in env.items()
    )
