"""Where the launches to 98% go: the first launch in a good cell (every parameter but the memory fraction, holding a
point within 2% of the optimum), the first launch within 2%, and the launches in good cells between them; for the
searcher and random sampling in the same pipeline (noise 4%, 40 launches, seeds 0-9).

``PYTHONPATH=$PWD python benchmarks/search/diagnostics/good_cells.py FAMILIES SPACES INSTANCE`` (comma-separated lists).
"""

import statistics
import sys

from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.family_bench import run_method
from benchmarks.search.landscape import enumerate_points


def value(land: FamilyLandscape, p: dict) -> float:
    o = land.evaluate(p)
    return o.true_value if o.outcome == "complete" and o.feasible else 0.0


fams, spaces, inst = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
for fam in fams:
    for sp in spaces:
        land = FamilyLandscape(load_space(sp), fam, inst)
        opt = family_optimum(land).value
        if opt <= 0:
            continue
        good = {}
        for p in enumerate_points(land.spec):
            if value(land, p) >= 0.98 * opt:
                good[land._cell(p)] = good.get(land._cell(p), 0) + 1
        for method in ("autotune", "pipeline-random"):
            cellhit, hit, inside = [], [], []
            for seed in range(10):
                r = run_method(land, opt, method, seed=seed, noise=0.04, launches=40)
                seq = r["launched"]
                c = next((i + 1 for i, p in enumerate(seq) if land._cell(p) in good), 41)

                h = next((i + 1 for i, p in enumerate(seq) if value(land, p) >= 0.98 * opt), 41)
                n_in = sum(1 for p in seq[c - 1 : h - 1] if land._cell(p) in good) if c <= 40 else 0
                cellhit.append(c)
                hit.append(h)
                inside.append(n_in)
            print(
                f"{fam:17s} {sp:22s} {method:16s} good cells {len(good):3d} | first good cell {statistics.mean(cellhit):5.1f} | first within 2% {statistics.mean(hit):5.1f} | launches in good cells before it {statistics.mean(inside):4.1f}",
                flush=True,
            )
