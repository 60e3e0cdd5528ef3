"""``python -m autotune.search``: run a study (Ray Tune + Optuna over a search space, one Ray Serve app per trial).

The study file is validated before Ray starts. Results go to ``results/<study>/``; rerunning the same command resumes
(finished trials are kept and never re-run); ``--fresh`` moves an old study directory aside first.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

DEFAULT_SPACE = "search_spaces/smoke.yaml"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autotune.search", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--space", default=DEFAULT_SPACE, help=f"study / search-space YAML (default: {DEFAULT_SPACE})")
    p.add_argument("--study", help="study name (default: the file's study.name); results/<study>/")
    p.add_argument("--trials", type=int, help="number of trials (default: the file's study.trials)")
    p.add_argument("--engine", choices=["sim", "sglang"], help="override the file's engine")
    p.add_argument("--profile", help="simulator profile (engine sim)")
    p.add_argument("--time-scale", type=float, help="simulator time scale (simulated s per wall s)")
    p.add_argument("--model-path", help="override server.model_path")
    p.add_argument("--tp-size", type=int, help="override server.tp_size")
    p.add_argument("--seed", type=int, help="sampler seed")
    p.add_argument("--results-dir", default="results", help="where study directories go (default: results)")
    p.add_argument("--address", help="join this Ray cluster (e.g. ray://head:10001 or auto); default: start one here")
    p.add_argument("--num-gpus", type=int, help="GPUs of the local Ray node (default: detected; the simulator "
                   "declares its profile's GPU count on a machine without GPUs)")
    p.add_argument("--max-concurrent", type=int, help="cap on trials at once (never above GPUs / GPUs per trial)")
    p.add_argument("--dashboard-port", type=int, default=8265)
    p.add_argument("--serve-port", type=int, default=8000, help="Ray Serve HTTP port (bound to 127.0.0.1)")
    p.add_argument("--stop-after-s", type=float, help="start no new trial after this many seconds (running trials "
                   "finish; rerun the command to continue the study)")
    p.add_argument("--fresh", action="store_true", help="move an existing results/<study>/ aside and start over")
    p.add_argument("--validate-only", action="store_true", help="check the study file and exit")
    return p


def _overrides(args: argparse.Namespace) -> Any:
    from autotune.space import StudyOverrides

    return StudyOverrides(name=args.study, trials=args.trials, engine=args.engine, sim_profile=args.profile,
                          time_scale=args.time_scale, model_path=args.model_path, tp_size=args.tp_size, seed=args.seed)


def resolve(argv: list[str] | None = None) -> tuple[argparse.Namespace, Any]:
    """The parsed arguments and the StudySpec they select (file + overrides); the study's folder is
    ``Path(args.results_dir) / spec.name``. Raises AutotuneError for a bad study file."""
    from autotune.space import load_study

    args = build_parser().parse_args(argv)
    return args, load_study(args.space, overrides=_overrides(args))


def main(argv: list[str] | None = None) -> int:
    from autotune.errors import AutotuneError

    try:
        args, spec = resolve(argv)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.validate_only:
        print(f"{spec.source}: valid study '{spec.name}' ({len(spec.params)} parameters, engine {spec.engine})")
        return 0
    from autotune.driver import StudyDriver

    driver = StudyDriver(spec, results_dir=Path(args.results_dir), address=args.address, num_gpus=args.num_gpus,
                         max_concurrent=args.max_concurrent, dashboard_port=args.dashboard_port,
                         serve_port=args.serve_port, fresh=args.fresh,
                         stop_after_s=args.stop_after_s)
    try:
        return driver.run()
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished trials are saved in {driver.store.root}; run the same command to resume.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    sys.exit(main())
