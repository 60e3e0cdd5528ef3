"""One landscape's share of a sweep, in its own module so that worker processes (spawned) can import it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.search.drivers import run_grid, run_searcher
from benchmarks.search.landscape import VARIANTS, Landscape


def cached_landscape(space: str, variant_name: str) -> tuple[Landscape, Path]:
    """The landscape of a space and variant with the simulated runs cached for it loaded, and that cache's file."""
    from benchmarks.search.__main__ import CACHE, cache_key, load_space
    from benchmarks.search.landscape import RUNS_VERSION

    land = Landscape(load_space(space), next(v for v in VARIANTS if v.name == variant_name))
    runs_file = CACHE / f"{space}-{variant_name}-{cache_key(space, land)}.runs{RUNS_VERSION}.json"
    if runs_file.exists():
        land.load_runs(json.loads(runs_file.read_text()))
    return land, runs_file


def one_landscape(task: dict[str, Any]) -> list[dict[str, Any]]:
    from benchmarks.search.__main__ import CACHE, cached_optimum

    space = task["space"]
    t0 = time.monotonic()
    land, runs_file = cached_landscape(space, task["variant"])
    opt = cached_optimum(space, land)
    out: list[dict[str, Any]] = []
    stage = tuple(task.get("finalists") or (0, 0))
    for noise in task["noise"]:
        first = int(task.get("first_seed", 0))
        for seed in range(first, first + task["seeds"]):
            for method in task["methods"]:
                if method == "grid":
                    run = run_grid(land, opt.value, seed=seed, noise=noise, launches=task["launches"], finalists=stage)
                else:
                    sampler = "random" if method == "random" else "tpe"
                    name = task["autotune_as"] if method == "autotune" and task["autotune_as"] else method
                    run = run_searcher(
                        land,
                        opt.value,
                        sampler=sampler,
                        seed=seed,
                        noise=noise,
                        launches=task["launches"],
                        slots=task["slots"],
                        method=name,
                        baseline=method in ("autotune-before", "random"),
                        finalists=stage,
                    )
                out.append(run.to_json())
    CACHE.mkdir(exist_ok=True)
    runs_file.write_text(json.dumps(land.dump_runs()))
    print(
        f"{space}/{land.variant.name}: optimum {opt.value:.1f} ({opt.feasible}/{opt.points} feasible), "
        f"{len(out)} runs in {time.monotonic() - t0:.0f} s",
        file=sys.stderr,
        flush=True,
    )
    return out
