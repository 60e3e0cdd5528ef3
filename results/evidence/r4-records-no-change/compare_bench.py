"""Compare two search-benchmark outputs run by run: ``python compare_bench.py BEFORE.json.gz AFTER.json.gz``."""

import gzip
import json
import sys


def load(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


before, after = load(sys.argv[1]), load(sys.argv[2])
same = before["runs"] == after["runs"]
print(f"{len(before['runs'])} runs, per-run traces (launched points, ratios, finalist outcome) identical: {same}")
print("other fields equal:", {k: before[k] == after[k] for k in before if k != "runs"}, "(command: its --out path)")
sys.exit(0 if same else 1)
