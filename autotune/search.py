"""``python -m autotune.search``: run a study (Ray Tune + Optuna over a search space, one Ray Serve app per trial).

The study file is validated before Ray starts. Results go to ``results/<study>/``; rerunning the same command resumes
(finished trials are kept and never re-run); ``--fresh`` moves an old study directory aside first.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path
from typing import Any

from autotune.space.spaces import packaged_space_names, resolve_space

EXAMPLES = """
examples:
  python -m autotune.search                                  # the smoke study on the simulator (CPU only, minutes)
  python -m autotune.search --space speculative --trials 20  # a packaged space by name (see --list-spaces)
  python -m autotune.search --space my_study.yaml --engine sglang --model-path meta-llama/Llama-3.1-8B-Instruct
  python -m autotune.search --space nccl --address auto      # join a running Ray cluster
  python -m autotune.search --storage postgresql://user:pw@db:5432/autotune   # the Optuna study on a team database
  python -m autotune.search --quiet --json > summary.json    # for scripts: only errors, then a JSON summary
  python -m autotune.report results/smoke                    # re-render results/smoke/best/ from the records
"""

DEFAULT_SPACE = "smoke"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.search",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--space",
        default=DEFAULT_SPACE,
        help="study / search-space YAML: a path, or the name of a space "
        f"shipped with autotune ({', '.join(packaged_space_names())}); default: {DEFAULT_SPACE}",
    )
    p.add_argument("--list-spaces", action="store_true", help="list the search spaces shipped with autotune and exit")
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
    p.add_argument(
        "--num-gpus",
        type=int,
        help="GPUs of the local Ray node (default: detected; the simulator "
        "declares its profile's GPU count on a machine without GPUs)",
    )
    p.add_argument("--max-concurrent", type=int, help="cap on trials at once (never above GPUs / GPUs per trial)")
    p.add_argument("--dashboard-port", type=int, default=8265)
    p.add_argument(
        "--metrics-port",
        type=int,
        help="the local Ray node's Prometheus metrics port, where the study's "
        "autotune_* metrics are scraped (default: Ray picks a free one)",
    )
    p.add_argument("--serve-port", type=int, default=8000, help="Ray Serve HTTP port (bound to 127.0.0.1)")
    p.add_argument(
        "--stop-after-s",
        type=float,
        help="start no new trial after this many seconds, counted from the command's start (running trials "
        "finish; rerun the command to continue the study)",
    )
    p.add_argument(
        "--finalists",
        type=int,
        metavar="K",
        help="relaunch the top K feasible configs before export "
        "(default: the file's study.finalists.count, 3; 0 skips the finalist stage)",
    )
    p.add_argument(
        "--finalists-only",
        action="store_true",
        help="run no trials: relaunch the finalists of an existing "
        "study as a new finalist stage (earlier stages are kept), then export",
    )
    p.add_argument("--fresh", action="store_true", help="move an existing results/<study>/ aside and start over")
    p.add_argument("--validate-only", action="store_true", help="check the study file and exit")
    p.add_argument(
        "--storage",
        help="Optuna storage URL for the study (default: sqlite:///results/<study>/study.db); "
        "e.g. postgresql://user:password@host:5432/db for a team or an optuna-dashboard server",
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument("-q", "--quiet", action="store_true", help="print only errors and the end result")
    out.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also show Ray's and Tune's own output (by default it goes to results/<study>/logs/ray-console.log)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print a machine-readable summary of the study on stdout at the end (progress then goes to stderr)",
    )
    return p


def _overrides(args: argparse.Namespace) -> Any:
    from autotune.space import StudyOverrides

    return StudyOverrides(
        name=args.study,
        trials=args.trials,
        engine=args.engine,
        sim_profile=args.profile,
        time_scale=args.time_scale,
        model_path=args.model_path,
        tp_size=args.tp_size,
        seed=args.seed,
    )


def resolve(argv: list[str] | None = None) -> tuple[argparse.Namespace, Any]:
    """The parsed arguments and the StudySpec they select (file + overrides); the study's folder is
    ``Path(args.results_dir) / spec.name``. Raises AutotuneError for a bad study file."""
    from dataclasses import replace

    from autotune.core.errors import SpaceError
    from autotune.space import load_study

    args = build_parser().parse_args(argv)
    for flag, value, ok, what in (
        ("--finalists", args.finalists, lambda v: v >= 0, "0 (no finalist stage) or more"),
        ("--max-concurrent", args.max_concurrent, lambda v: v >= 1, "1 or more (leave it out for no cap)"),
        ("--num-gpus", args.num_gpus, lambda v: v >= 0, "0 or more"),
        ("--stop-after-s", args.stop_after_s, lambda v: v > 0, "a number of seconds above 0"),
        ("--dashboard-port", args.dashboard_port, _is_port, "a TCP port, 1-65535"),
        ("--serve-port", args.serve_port, _is_port, "a TCP port, 1-65535"),
        ("--metrics-port", args.metrics_port, _is_port, "a TCP port, 1-65535"),
    ):
        if value is not None and not ok(value):
            raise SpaceError(f"{flag} must be {what}, got {value:g}")
    joined = "--address" if args.address else "RAY_ADDRESS" if os.environ.get("RAY_ADDRESS") else ""
    for flag, value in (("--num-gpus", args.num_gpus), ("--metrics-port", args.metrics_port)):
        if joined and value is not None:
            raise SpaceError(
                f"{flag} sets up the local Ray node this command starts, but {joined} joins a running cluster, whose "
                f"nodes keep their own settings (`ray start --num-gpus N --metrics-export-port P` on each); drop {flag}"
            )
    if args.fresh and args.finalists_only:
        raise SpaceError(
            "--fresh and --finalists-only contradict each other: --fresh moves the study aside and starts over, "
            "--finalists-only relaunches the finalists of the study as it is; pass one of them"
        )
    spec = load_study(resolve_space(args.space), overrides=_overrides(args))
    if args.finalists is not None:
        spec = replace(spec, finalists=spec.finalists.model_copy(update={"count": args.finalists}))
    return args, spec


def _is_port(value: int) -> bool:
    return 1 <= value <= 65535


def main(argv: list[str] | None = None) -> int:
    from autotune.core.errors import AutotuneError

    if "--list-spaces" in (sys.argv[1:] if argv is None else argv):
        for name in packaged_space_names():
            print(f"{name:24s} {resolve_space(name)}")
        return 0
    try:
        args, spec = resolve(argv)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.validate_only or spec.engine == "sim":  # the simulator's flags and profiles are known here, exactly
        from autotune.sim.flagcheck import check_engine_flags

        check = check_engine_flags(spec)
        if check.problems:
            print(
                f"error: {spec.source}: study '{spec.name}' is not valid for its engine ({check.note}):",
                file=sys.stderr,
            )
            for line in check.problems:
                print(f"  {line}", file=sys.stderr)
            return 2
    if args.validate_only:
        base = spec.baseline
        print(
            f"{spec.source}: valid study '{spec.name}' ({len(spec.params)} parameters, engine {spec.engine}; "
            f"{check.note})"
        )
        print(
            f"baseline (your current configuration, measured first): {base}"
            if base is not None
            else "no baseline: add study.baseline (or points_to_evaluate) to judge the result against your configuration"
        )
        return 0
    from autotune.progress.console import Console, Verbosity
    from autotune.study.driver import StudyDriver
    from autotune.study.interrupts import Terminated, sigterm_raises

    verbosity = Verbosity.QUIET if args.quiet else Verbosity.VERBOSE if args.verbose else Verbosity.NORMAL
    console = Console(out=sys.stderr if args.json else sys.stdout, verbosity=verbosity)
    driver = StudyDriver(
        spec,
        results_dir=Path(args.results_dir),
        address=args.address,
        num_gpus=args.num_gpus,
        max_concurrent=args.max_concurrent,
        dashboard_port=args.dashboard_port,
        serve_port=args.serve_port,
        fresh=args.fresh,
        stop_after_s=args.stop_after_s,
        console=console,
        storage=args.storage,
        metrics_port=args.metrics_port,
        finalists_only=args.finalists_only,
    )
    try:
        with sigterm_raises():
            code = driver.run()
    except AutotuneError as exc:
        console.error(f"error: {exc}")
        code = 2
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise
        where = f" writing {exc.filename}" if exc.filename else ""
        console.error(
            f"error: {exc.strerror}{where}. Free space on that filesystem (or move the study with "
            f"--results-dir) and run the same command again: finished trials are kept in {driver.store.root}."
        )
        code = 2
    except KeyboardInterrupt as exc:
        sigterm = isinstance(exc, Terminated)
        console.error(
            f"\ninterrupted{' (SIGTERM)' if sigterm else ''}: finished trials are saved in {driver.store.root}; run "
            "the same command to resume."
        )
        code = 143 if sigterm else 130
    if args.json:
        from autotune.report.study_summary import print_summary

        # why the run ended before its budget: an engine's rejected flag, else the time box (the stopping rule's
        # reason is the summary's own `stopped_early`, kept in study.json)
        print_summary(driver.store.root, exit_code=code, stop_reason=driver.stop_reason or driver.time_box_note)
    return code


if __name__ == "__main__":
    os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")
    sys.exit(main())
