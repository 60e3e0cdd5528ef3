"""Search-efficiency benchmark: the project's searcher vs random vs grid on simulated landscapes.

    python -m benchmarks.search run [--spaces ...] [--variants ...] [--seeds 10] [--first-seed 0] [--noise 0 0.04] [--launches 60]
                                    [--methods autotune random grid] [--slots 1] [--jobs 2] --out FILE.json
    python -m benchmarks.search table FILE.json [--cap 60]

See benchmarks/search/README.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import multiprocessing
import sys
from pathlib import Path
from typing import Any

from autotune.space import StudyOverrides, StudySpec, load_study
from benchmarks.search import jsonio
from benchmarks.search import landscape as landscape_mod
from benchmarks.search.landscape import VARIANTS, Landscape, Optimum, optimum
from benchmarks.search.metrics import BUDGETS, fmt_launches, summarize
from benchmarks.search.sweep import one_landscape

ROOT = Path(__file__).resolve().parents[2]
SPACES = ("speculative", "h200-tp1-speculative", "nccl")  # the default sweep
ALL_SPACES = tuple(sorted(p.stem for p in (ROOT / "search_spaces").glob("*.yaml")))  # each has a sim profile
CACHE = Path(__file__).resolve().parent / ".cache"
# The nccl study's 5 s TTFT p99 at 128 concurrent requests is met by no point of the calibrated profile (the first
# wave of 128 prompts queues for prefill); 8 s keeps a failure region (slow collectives) without emptying the space.
CONSTRAINT_OVERRIDES: dict[str, dict[str, float]] = {"nccl": {"ttft_ms.p99": 8000.0}}


def load_space(name: str) -> StudySpec:
    path = ROOT / "search_spaces" / f"{name}.yaml"
    spec = load_study(path, overrides=StudyOverrides(engine="sim"))
    over = CONSTRAINT_OVERRIDES.get(name, {})
    cons = tuple(dataclasses.replace(c, max=over.get(c.metric, c.max)) for c in spec.constraints)
    return dataclasses.replace(spec, name=name, constraints=cons)


def cache_key(space: str, land: Landscape) -> str:
    """The study's content that decides the landscape (not its file's comments), the variant and the version."""
    spec = land.spec
    content = (
        spec.params,
        spec.objectives,
        spec.constraints,
        spec.points_to_evaluate,
        spec.server,
        spec.sim,
        spec.workload,
        spec.workload_properties,
        spec.plan.concurrencies,
    )
    return hashlib.sha256(
        (
            space + repr(content) + land.variant.key() + f"{landscape_mod.LANDSCAPE_VERSION}/{landscape_mod.KV_BUCKET}"
        ).encode()
    ).hexdigest()[:16]


def cached_optimum(space: str, land: Landscape) -> Optimum:
    """The enumerated optimum, cached on disk by the space file, the variant and the landscape version."""
    path = CACHE / f"{space}-{land.variant.name}-{cache_key(space, land)}.json"
    if path.exists():
        d = json.loads(path.read_text())
        return Optimum(d["value"], d["params"], d["points"], d["feasible"])
    opt = optimum(land)
    CACHE.mkdir(exist_ok=True)
    path.write_text(json.dumps(dataclasses.asdict(opt)))
    return opt


def cmd_run(a: argparse.Namespace) -> int:
    variants = {v.name: v for v in VARIANTS}
    tasks = [
        dict(
            space=s,
            variant=v,
            noise=a.noise,
            seeds=a.seeds,
            first_seed=a.first_seed,
            methods=a.methods,
            launches=a.launches,
            slots=a.slots,
            autotune_as=a.autotune_as,
            finalists=list(a.finalists),
        )
        for s in a.spaces
        for v in a.variants
        if variants[v].affects(load_space(s))
    ]  # a drafter-only variant of a space without one: the base again
    doc: dict[str, Any] = {
        "command": "python -m benchmarks.search " + " ".join(sys.argv[1:]),
        "launches": a.launches,
        "slots": a.slots,
        "simulated": True,
        "complete": False,
        "runs": [],
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)

    def keep(part: list[dict[str, Any]], done: int) -> None:  # written after every landscape: a partial sweep counts
        doc["runs"].extend(part)
        doc["complete"] = done == len(tasks)
        jsonio.dump(doc, a.out)

    if a.jobs > 1:
        with multiprocessing.get_context("spawn").Pool(a.jobs) as pool:
            for i, part in enumerate(pool.imap_unordered(one_landscape, tasks, chunksize=1), 1):
                keep(part, i)
    else:
        for i, t in enumerate(tasks, 1):
            keep(one_landscape(t), i)
    print(table(doc))
    return 0


def table(doc: dict[str, Any], *, hard: bool = False) -> str:
    """Markdown summary per noise, space and method (and pooled). ``hard``: only landscapes where no seed point of the
    study is already within 2% of the optimum."""
    runs = [{**r, "seed_launches": seed_launches(r)} for r in doc["runs"] if not (hard and r["seed_within_2pct"])]
    cap = doc["launches"]
    methods = list(dict.fromkeys(r["method"] for r in runs))
    spaces = list(dict.fromkeys(r["space"] for r in runs))
    lines = [
        "| noise | space | method | runs | median launches to 98% | reached | regret@"
        + " | regret@".join(map(str, BUDGETS))
        + " | export < 95% at 40 | within 2% at 40 | after the seeds | launches made |",
        "| --- | --- | --- | ---: | ---: | ---: | "
        + " | ".join("---:" for _ in BUDGETS)
        + " | ---: | ---: | ---: | ---: |",
    ]
    with_stage = any(r.get("finalist_launches") for r in runs)
    if with_stage:
        lines[0] += " within 2% after the finalist stage | export < 95% after it | its launches |"
        lines[1] += " ---: | ---: | ---: |"
    for noise in sorted({r["noise"] for r in runs}):
        for space in [*spaces, "pooled"]:
            for m in methods:
                sel = [
                    r
                    for r in runs
                    if r["noise"] == noise and r["method"] == m and (space == "pooled" or r["space"] == space)
                ]
                if not sel:
                    continue
                s = summarize(sel)
                lines.append(
                    f"| {noise:.0%} | {space} | {m} | {s.runs} | {fmt_launches(s.median_launches, cap)} | {s.reached:.0%} | "
                    + " | ".join(f"{s.regret[b]:.3f}" for b in BUDGETS)
                    + f" | {s.below_poor:.0%} | {s.within_2pct_at_40:.0%} | {fmt_launches(s.median_after_seeds, cap)} | "
                    f"{s.mean_launches:.1f} |" + (finalist_cells(sel) if with_stage else "")
                )
    return "\n".join(lines)


def finalist_cells(runs: list[dict[str, Any]]) -> str:
    """Table cells for the finalist stage after the budget: share of runs whose winner is within 2% of the optimum,
    share below 95%, and the median relaunches it cost (runs without a stage: '-')."""
    staged = [r for r in runs if r.get("finalist_ratio") is not None]
    if not staged:
        return " - | - | - |"
    within = sum(r["finalist_ratio"] >= 0.98 - 1e-12 for r in staged) / len(staged)
    poor = sum(r["finalist_ratio"] < 0.95 for r in staged) / len(staged)
    cost = sorted(r["finalist_launches"] for r in staged)[len(staged) // 2]
    return f" {within:.0%} | {poor:.0%} | {cost} |"


_SEEDS: dict[tuple[str, str], list[str]] = {}


def seed_launches(run: dict[str, Any]) -> int:
    """How many of the run's first launches were the study's seed points (``points_to_evaluate`` and their lifted
    caps, as the landscape's study has them)."""
    key = (run["space"], run["variant"])
    if key not in _SEEDS:
        from autotune.policy.prescreen import uncapped_seeds
        from benchmarks.search.landscape import vary_spec

        spec = vary_spec(load_space(run["space"]), next(v for v in VARIANTS if v.name == run["variant"]))
        _SEEDS[key] = [
            json.dumps(dict(p), sort_keys=True, default=str) for p in [*spec.points_to_evaluate, *uncapped_seeds(spec)]
        ]
    n = 0
    for params in run["launched"]:
        if json.dumps(params, sort_keys=True, default=str) not in _SEEDS[key]:
            break
        n += 1
    return n


def cmd_table(a: argparse.Namespace) -> int:
    docs = [jsonio.load(f) for f in a.files]
    print(
        table({"launches": min(d["launches"] for d in docs), "runs": [r for d in docs for r in d["runs"]]}, hard=a.hard)
    )
    return 0


def cmd_rescore(a: argparse.Namespace) -> int:
    """Judge a results file's runs against the optimum as the landscape computes it now (``ratios`` are the exported
    config's true value over the optimum, so a corrected optimum rescales them exactly, and ``finalist_ratio`` with
    them)."""
    doc = jsonio.load(a.file)
    optima: dict[tuple[str, str], tuple[float, list[float]]] = {}
    changed = 0
    for run in doc["runs"]:
        key = (run["space"], run["variant"])
        if key not in optima:
            variant = next(v for v in VARIANTS if v.name == run["variant"])
            land = Landscape(load_space(run["space"]), variant)
            seeds = [land.evaluate(dict(p)).true_value for p in land.spec.points_to_evaluate]
            optima[key] = (cached_optimum(run["space"], land).value, seeds)
        new, seeds = optima[key]
        if abs(new - run["optimum"]) > 1e-9 * max(new, 1.0):
            scale = run["optimum"] / new
            run["ratios"] = [x * scale for x in run["ratios"]]
            if run.get("finalist_ratio") is not None:  # the finalist stage's export, judged against the same optimum
                run["finalist_ratio"] *= scale
            run["seed_within_2pct"] = any(v >= 0.98 * new for v in seeds)
            run["optimum"] = new
            changed += 1
    jsonio.dump(doc, a.file)
    print(f"{changed} of {len(doc['runs'])} runs rescored")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.search", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="simulate studies and write their runs")
    r.add_argument("--spaces", nargs="+", default=list(SPACES), choices=ALL_SPACES)
    r.add_argument("--variants", nargs="+", default=[v.name for v in VARIANTS], choices=[v.name for v in VARIANTS])
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--first-seed", type=int, default=0, help="seeds FIRST .. FIRST + SEEDS - 1 (a second sample)")
    r.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.04])
    r.add_argument("--launches", type=int, default=60, help="launches per simulated study")
    r.add_argument(
        "--methods",
        nargs="+",
        default=["autotune", "random", "grid"],
        choices=["autotune", "random", "grid", "autotune-before"],
        help="autotune-before: the searcher before issue #14 (benchmarks/search/baseline.py)",
    )
    r.add_argument("--slots", type=int, default=1, help="trials in flight at once (searcher methods)")
    r.add_argument("--jobs", type=int, default=1, help="landscapes simulated in parallel processes")
    r.add_argument(
        "--autotune-as",
        default="",
        help="name the autotune method's runs so (e.g. the searcher of "
        "another checkout: PYTHONPATH=/that/checkout:$PWD)",
    )
    r.add_argument(
        "--finalists",
        type=int,
        nargs=2,
        default=[0, 0],
        metavar=("COUNT", "ROUNDS"),
        help="after the budget, the study's finalist stage: the top COUNT feasible configs (and the study's baseline "
        "where it completed outside them) relaunched ROUNDS times each, the winner decided as "
        "autotune.finalists.choice does (default 0 0: none)",
    )
    r.add_argument("--out", required=True)
    r.set_defaults(func=cmd_run)
    t = sub.add_parser("table", help="print the summary table of a results file")
    t.add_argument("files", nargs="+", help="results files; their runs are pooled into one table")
    t.add_argument("--hard", action="store_true", help="only landscapes where no seed point is within 2%%")
    t.set_defaults(func=cmd_table)
    rs = sub.add_parser("rescore", help="rescale a results file's runs to the optimum as computed now")
    rs.add_argument("file")
    rs.set_defaults(func=cmd_rescore)
    a = ap.parse_args(argv)
    if getattr(a, "seeds", 1) < 1 or getattr(a, "launches", 1) < 1:
        ap.error("--seeds and --launches must be at least 1")
    return int(a.func(a))


if __name__ == "__main__":
    sys.exit(main())
