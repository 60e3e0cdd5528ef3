"""Compare two benchmark outputs run by run: ``trace.py`` files (every field: launched points, ratios, the searcher's
counters, every Optuna trial with its state, parameters, values and skip reason) or ``family_bench`` files (each run's
ratios and counts). Prints how many runs differ; exits 1 if any does."""

import gzip
import json
import sys


def load(path: str) -> dict:
    doc = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
    if isinstance(doc, list):  # trace.py
        return {json.dumps(r["k"]): r for r in doc}
    return {
        json.dumps([r[k] for k in ("space", "family", "instance", "noise", "seed", "method")]): r for r in doc["runs"]
    }


a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), "the files hold different runs"
diff = [k for k in a if a[k] != b[k]]
launched = sum(len(r.get("launched", ())) for r in a.values())
trials = sum(len(r.get("trials", ())) for r in a.values())
print(f"{len(a)} runs, {launched} launched points, {trials} Optuna trials: {len(diff)} differ")
for k in diff[:10]:
    print("differs:", k)
sys.exit(1 if diff else 0)
