# Usage: PYTHONPATH=$PWD python benchmarks/search/diagnostics/export_margin.py SIGMA FAMILY SPACES FIRST_INSTANCE END_INSTANCE SEEDS
"""Replay: launches to 98% with the export ranked by estimate x chance the measured-feasible launch is truly feasible
(its constraint margins over a relative noise sigma), against the current export. Same launches (the export does not
steer the search)."""

import json, math, sys, statistics as stt, random
from benchmarks.search import drivers
from benchmarks.search.drivers import Lab
from benchmarks.search.family_bench import run_method
from benchmarks.search.families import FamilyLandscape, family_optimum
from benchmarks.search.__main__ import load_space
from autotune.export.best import select_best
from autotune.trial.score import objective_key

SIG = float(sys.argv[1])
fam = sys.argv[2]
spaces = sys.argv[3].split(",")
insts = range(int(sys.argv[4]), int(sys.argv[5]))
seeds = range(int(sys.argv[6]))


def phi(x):
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


class Lab2(Lab):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.alt = []

    def record(self, number, trial_id, params):
        rec = super().record(number, trial_id, params)
        if len(self.alt) < len(self.ratios):  # a launch was counted
            est = self.rank.estimates(self.records)
            bounds = {objective_key(c.metric, c.level): c.max for c in self.land.spec.constraints if c.max}
            best, bs = None, -1.0
            for r in self.records:
                if r.number not in est or not r.feasible:
                    continue
                m = min([(-r.constraints[k]) / b for k, b in bounds.items() if k in r.constraints] or [1.0])
                s = est[r.number] * phi(m / SIG)
                if s > bs:
                    best, bs = r, s
            if not est:
                cur = self.exported()
                best = cur
            true = self.land.evaluate(best.params).true_value if best is not None else 0.0
            self.alt.append(true / self.optimum if self.optimum > 0 else 0.0)
        return rec


drivers_Lab = Lab
import benchmarks.search.family_bench as fb

fb.Lab = Lab2
out = []
for sp in spaces:
    for i in insts:
        land = FamilyLandscape(load_space(sp), fam, i)
        opt = family_optimum(land)
        if opt.value <= 0:
            continue
        for s in seeds:
            labs = []
            run_method(land, opt.value, "autotune", seed=s, noise=0.04, launches=40, labs=labs)
            lab = labs[0]
            hit = lambda rs: next((n + 1 for n, x in enumerate(rs) if x >= 0.98), 80)
            out.append((sp, i, s, hit(lab.ratios), hit(lab.alt), lab.ratios[-1], lab.alt[-1]))
            print(out[-1], flush=True)
d = [b - a for *_, a, b, _, _ in out]
rng = random.Random(0)
boots = sorted(stt.fmean(rng.choices(d, k=len(d))) for _ in range(2000))
print(
    f"n={len(d)} alt - current launches to 98%: {stt.fmean(d):+.2f} [{boots[100]:+.2f}, {boots[1899]:+.2f}]; "
    f"mean current {stt.fmean(x[3] for x in out):.1f} alt {stt.fmean(x[4] for x in out):.1f}; "
    f"final ratio current {stt.fmean(x[5] for x in out):.3f} alt {stt.fmean(x[6] for x in out):.3f}"
)
