"""Compare two search-benchmark outputs run by run: every field of every run (launched points in order, the export's
ratio after each launch, the counts), apart from the command line that wrote them.

    python results/evidence/policy-wing-no-change/compare.py BEFORE.json[.gz] AFTER.json[.gz]
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def load(path: str) -> list[dict]:
    raw = Path(path).read_bytes()
    data = json.loads(gzip.decompress(raw) if path.endswith(".gz") else raw)
    return data["runs"]


def main(before: str, after: str) -> int:
    a, b = load(before), load(after)
    different = [i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y]
    launched = sum(len(r.get("launched", ())) for r in a)
    print(f"{len(a)} vs {len(b)} runs, {launched} launched points; {len(different)} runs differ {different[:10]}")
    return 0 if len(a) == len(b) and not different else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
