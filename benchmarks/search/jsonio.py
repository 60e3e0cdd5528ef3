"""Results files of the search benchmark: JSON, gzip-compressed when the name ends in ``.gz`` (the committed sweeps
are, so that the repository stays small enough to travel to the GPU machine in one call)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def load(path: str | Path) -> Any:
    p = Path(path)
    data = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    return json.loads(data)


def dump(doc: Any, path: str | Path) -> None:
    p = Path(path)
    text = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(text, mtime=0) if p.suffix == ".gz" else text)
