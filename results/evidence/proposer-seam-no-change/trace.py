"""Full per-run traces of the search benchmark's searcher methods (launched points, ratios, counters, every Optuna
trial with its state and skip reason), for a before/after comparison of a refactor."""

import gzip
import json
import sys

from autotune.study import searcher as S
from benchmarks.search import family_bench as FB
from benchmarks.search.__main__ import load_space
from benchmarks.search.drivers import run_searcher
from benchmarks.search.families import FamilyLandscape, applies, family_optimum

made = []
orig = S.OptunaStudySearcher.__init__


def init(self, *a, **k):
    orig(self, *a, **k)
    made.append(self)


S.OptunaStudySearcher.__init__ = init

COUNTERS = (
    "suggested",
    "duplicates_skipped",
    "screened_skipped",
    "repaired",
    "neighbours_launched",
    "exhausted",
    "relaunched",
    "stop_reason",
    "finished_reason",
)


def capture(run):
    s = made[-1]
    run["counters"] = {c: getattr(s, c) if hasattr(s, c) else getattr(s.proposer, c) for c in COUNTERS}
    run["trials"] = [
        [t.number, t.state.name, t.params, t.values, t.user_attrs.get("skipped"), str(t.user_attrs.get("duplicate_of"))]
        for t in s.study.get_trials(deepcopy=False)
    ]
    return run


out = []
for space in ("speculative", "nccl"):
    for fam in ("spec-nonmonotone", "plateau", "needle", "memory-shapes"):
        sp = load_space(space)
        if not applies(fam, sp):
            continue
        land = FamilyLandscape(sp, fam, 0)
        opt = family_optimum(land).value
        for seed in range(3):
            for m in ("autotune", "pipeline-random", "no-defer", "no-repair", "no-learned"):
                r = FB.run_method(land, opt, m, seed=seed, noise=0.04, launches=40)
                out.append(capture({"k": [space, fam, seed, m], **r}))
            for kw in (
                dict(sampler="tpe", slots=2),
                dict(sampler="tpe", baseline=True),
                dict(sampler="random", baseline=True),
            ):
                r = run_searcher(land, opt, seed=seed, noise=0.04, launches=40, **kw).to_json()
                out.append(capture({"k": [space, fam, seed, json.dumps(kw)], **r}))
        print(space, fam, len(out), file=sys.stderr, flush=True)
with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "wt") as fh:
    json.dump(out, fh, sort_keys=True, default=str)
