"""Paired: runs whose finalist stage exports nothing feasible (finalist ratio 0 or no stage), repair-evidence - searcher."""

import glob
import gzip
import json
import random
import statistics
import sys

runs = [r for f in sys.argv[1:] for g in glob.glob(f) for r in json.load(gzip.open(g))["runs"] if r["optimum"] > 0]


def key(r: dict) -> tuple:
    return r["space"], r["variant"], r["seed"]


a = {key(r): r for r in runs if r["method"] == "autotune"}
pairs = [(a[key(r)], r) for r in runs if r["method"] == "repair-evidence" and key(r) in a]
d = [((b["finalist_ratio"] or 0) == 0) - ((x["finalist_ratio"] or 0) == 0) for x, b in pairs]
rng = random.Random(0)
boots = sorted(statistics.fmean(rng.choices(d, k=len(d))) for _ in range(1000))
n_a = sum((x["finalist_ratio"] or 0) == 0 for x, _ in pairs)
n_b = sum((b["finalist_ratio"] or 0) == 0 for _, b in pairs)
print(
    f"{len(pairs)} paired runs; nothing feasible after the stage: searcher {n_a}, repair-evidence {n_b}; "
    f"share difference {statistics.fmean(d):+.3f} [{boots[50]:+.3f}, {boots[949]:+.3f}]"
)
