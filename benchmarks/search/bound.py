"""The fewest launches any searcher can need on a ``needle`` landscape, in expectation over where the family puts
the needle (issue #29): how far the goal of 0.5x random sampling's launches can be reached on that family at all.

A needle landscape (``families.FamilyLandscape``) is the family's other structure with one cell (every parameter but
the memory fraction) 10-15% above it, the cell drawn uniformly from the launchable ones after everything else. Give a
searcher everything but the needle's place. Call a cell *decisive* when, with the needle there, only its own points
are within 2% of the optimum. With the needle in a decisive cell, what a searcher measures elsewhere does not depend on
where the needle is, so whatever it does, its first ``t`` launches cover at most ``t`` of the ``k`` decisive cells:
the chance it has found the needle by launch ``t`` is at most ``t / k``. Counting every other placement as found at the
first launch gives a lower bound on the mean launches to 98% of the optimum (never within the run counted as
``cap``), with or without measurement noise (noise can hide a find, not make one). The bound is loose where few
cells are decisive (the other placements are counted as one launch) and exact where all are.
"""

from __future__ import annotations

import argparse
import glob
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass

from benchmarks.search import jsonio
from benchmarks.search.families import FamilyLandscape
from benchmarks.search.landscape import enumerate_points
from benchmarks.search.metrics import TARGET, launches_to

LAUNCHES = 40
NEVER = 80  # launches counted for a run that never gets within 2% (family_bench's tables count the same)


def ordered_search_mean(k: int, launches: int = LAUNCHES, never: float = NEVER) -> float:
    """Mean launches until one of ``k`` equally likely cells is hit when a launch covers one new cell each time (never
    within ``launches`` counted as ``never``): the least any order can need."""
    if k <= launches:
        return (k + 1) / 2
    return sum(t / k for t in range(1, launches + 1)) + (1 - launches / k) * never


@dataclass(frozen=True)
class NeedleBound:
    landscape: str
    cells: int  # launchable cells the needle can be drawn in
    decisive: int  # cells where only the needle's own points are within 2% of the optimum
    needle_decisive: bool  # whether this landscape's drawn needle is in one
    mean_launches: float  # the bound: no searcher's mean launches to 98% over the needle's places is lower


def needle_bound(land: FamilyLandscape, launches: int = LAUNCHES, never: float = NEVER) -> NeedleBound:
    if land.family != "needle" or land.needle is None:
        raise ValueError(f"{land.name} is not a needle landscape with a needle")
    gain, drawn = land.needle_gain, land.needle
    cells = sorted({land._cell(p) for p in land._launchable()})
    flat = FamilyLandscape(land.spec, land.family, land.instance)
    flat.needle = None  # the same landscape without its needle
    best_in: dict[str, float] = defaultdict(float)
    for p in enumerate_points(flat.spec):
        c = flat._cell(p)
        best_in[c] = max(best_in[c], flat.evaluate(p).true_value)
    best = max(best_in.values())
    decisive = [c for c in cells if TARGET * gain * best_in.get(c, 0.0) > best]
    k = len(decisive)
    mean = (k * ordered_search_mean(k, launches, never) + (len(cells) - k)) / len(cells) if k else 1.0
    return NeedleBound(land.name, len(cells), k, drawn in decisive, mean)


def measured_means(files: list[str], never: float = NEVER) -> dict[tuple[str, str, int], float]:
    """(method, space, instance) -> mean launches to 98% of the needle runs at 4% noise in family_bench files."""
    runs: dict[tuple[str, str, int, int], float] = {}
    for f in files:
        for r in jsonio.load(f)["runs"]:
            if r["family"] == "needle" and r["noise"] == 0.04:
                x = launches_to(r["ratios"])
                runs[(r["method"], r["space"], r["instance"], r["seed"])] = x if x <= LAUNCHES else never
    by: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for (m, s, i, _), x in runs.items():
        by[(m, s, i)].append(x)
    return {k: statistics.fmean(v) for k, v in by.items()}


def report(spaces: list[str], instances: int, files: list[str], methods: list[str], first: int = 0) -> str:
    from benchmarks.search.__main__ import load_space

    means = measured_means(files)
    rows = [
        "| landscape | cells | decisive | drawn needle decisive | bound: mean launches to 98% | "
        + " | ".join(f"{m} (measured)" for m in methods)
        + " |",
        "| --- | ---: | ---: | --- | ---: |" + " ---: |" * len(methods),
    ]
    sums: dict[str, float] = defaultdict(float)
    for s in spaces:
        for i in range(first, first + instances):
            b = needle_bound(FamilyLandscape(load_space(s), "needle", i))
            got = [means.get((m, s, i)) for m in methods]
            if any(g is None for g in got):
                continue
            sums["bound"] += b.mean_launches
            for m, g in zip(methods, got, strict=True):
                sums[m] += g  # type: ignore[operator]
            cells = " | ".join(f"{g:.1f}" for g in got)  # type: ignore[str-format]
            rows.append(
                f"| {b.landscape} | {b.cells} | {b.decisive} | {b.needle_decisive} | {b.mean_launches:.1f} | {cells} |"
            )
    base = methods[-1]
    if sums[base]:
        ratios = ", ".join(f"{k} {v / sums[base]:.2f}x" for k, v in sums.items() if k != base)
        rows.append(f"\nSummed over these landscapes, against {base}: {ratios}.")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", nargs="+", default=["speculative", "h200-tp1-speculative", "nccl", "h200x2-tp2-nccl"])
    ap.add_argument("--first-instance", type=int, default=0)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--methods", nargs="+", default=["autotune", "pipeline-random"], help="the last is the base")
    ap.add_argument("files", nargs="*", help="family_bench results whose needle runs to compare with the bound")
    a = ap.parse_args(argv)
    files = [f for pattern in a.files for f in sorted(glob.glob(pattern))]
    print(report(a.spaces, a.instances, files, a.methods, a.first_instance))
    return 0


if __name__ == "__main__":
    sys.exit(main())
