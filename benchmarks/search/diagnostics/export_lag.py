"""Where the export lags the launches: per family, the mean launches until a launched point is within 2% of the
optimum, until the study's export (ranked by the model's estimates) is, and until the measured best would be, over the
same runs of the searcher (noise 4%, 40 launches, seeds 0-9, no finalist stage; never within the run = 80). For each
run's first launch within 2%: whether it was measured feasible, and its rank by the model's estimate at that launch.

``PYTHONPATH=$PWD python benchmarks/search/diagnostics/export_lag.py FAMILIES SPACES INSTANCE`` (comma-separated lists).
"""

import statistics
import sys

from autotune.export.best import select_best
from benchmarks.search import drivers
from benchmarks.search.__main__ import load_space
from benchmarks.search.families import FamilyLandscape, applies, family_optimum
from benchmarks.search.family_bench import run_method

NEVER = 80


def first(xs: list[float]) -> int:
    return next((i + 1 for i, x in enumerate(xs) if x >= 0.98), NEVER)


def one_run(land: FamilyLandscape, opt: float, seed: int) -> tuple[int, int, int, bool | None, int | None]:
    labs: list[drivers.Lab] = []
    r = run_method(land, opt, "autotune", seed=seed, noise=0.04, launches=40, finalists=(0, 0), labs=labs)
    lab = labs[0]
    records = lab.records[: len(r["ratios"])]
    launched, measured_best = [], []
    for i, rec in enumerate(records):
        o = land.evaluate(rec.params)
        launched.append(o.true_value / opt if o.outcome == "complete" and o.feasible else 0.0)
        best = select_best(records[: i + 1], lab.objectives, {}).record
        measured_best.append(land.evaluate(best.params).true_value / opt if best is not None else 0.0)
    t = first(launched)
    feasible = rank = None
    if t <= len(records):
        rec = records[t - 1]
        est = lab.rank.estimates(records[:t])
        feasible = rec.feasible
        if rec.number in est:
            rank = sorted(est.values(), reverse=True).index(est[rec.number]) + 1
    return t, first(r["ratios"]), first(measured_best), feasible, rank


def main() -> None:
    families, spaces, instance = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
    for fam in families:
        rows = []
        for sp in spaces:
            spec = load_space(sp)
            if not applies(fam, spec):
                continue
            land = FamilyLandscape(spec, fam, instance)
            opt = family_optimum(land).value
            if opt > 0:
                rows += [one_run(land, opt, seed) for seed in range(10)]
        if not rows:
            continue
        found = [x for x in rows if x[0] <= 40]
        ranks = [x[4] for x in found if x[4] is not None]
        print(
            f"{fam}: {len(rows)} runs; mean launches to a launch within 2% {statistics.fmean(x[0] for x in rows):.1f}, "
            f"to the export {statistics.fmean(x[1] for x in rows):.1f}, to the measured best "
            f"{statistics.fmean(x[2] for x in rows):.1f}; of the {len(found)} runs with such a launch, "
            f"{sum(1 for x in found if x[3] is False)} measured it infeasible, {sum(1 for r in ranks if r > 1)} "
            f"ranked it below first by the model at that launch, {sum(1 for x in found if x[1] == NEVER)} never "
            "exported a config within 2%",
            flush=True,
        )


if __name__ == "__main__":
    main()
