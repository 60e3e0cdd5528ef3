"""``python -m autotune.verify results/<study>``: start the exported configuration exactly as exported and measure it.

It runs ``best/launch.sh`` (for a study tuned on the simulator: ``best/rehearse_sim.sh``) outside Ray, in its own
process group, with ``HOST``/``PORT`` set and ``PYTHON`` honoured (default: this interpreter); waits for ``/health``;
measures it with the study's workload and load levels using autotune's client (and, with ``--bench-serving``, SGLang's
own ``python -m sglang.bench_serving`` per level: the same lengths and request count, ``--max-concurrency`` = level);
compares each figure with the study's figure and its 95% interval; writes ``verify.json`` and ``verify.md`` under
``results/<study>/verify/``; and tears the server's process group down. Exit status: 0 when every judged figure is
within its interval (or tolerance, where the study recorded no interval), 1 otherwise, 2 when it could not run.

``--as-measured`` adds the study's benchmark-only settings back (``SGLANG_SIMULATE_ACC_LEN=... bash launch.sh --
--load-format dummy``), for a machine without the real weights; the report says so.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotune.bench.client import requests_for_level, run_plan
from autotune.bench.plan_codec import plan_from_json
from autotune.bench.types import BenchPlan
from autotune.core.errors import AutotuneError, LaunchError
from autotune.core.failures import FailureKind
from autotune.core.site import nvls_problems, site_policy, study_env_problems
from autotune.core.trial import IPV4_ONLY, LaunchSpec, is_ipv6
from autotune.trial.launcher import ServerProcess
from autotune.verify.compare import (
    JUDGED_DEFAULT,
    METRICS,
    Figure,
    bench_serving_levels,
    client_offsets,
    compare,
    level_value,
)
from autotune.verify.report import render_markdown
from autotune.verify.sglang import bench_serving_available, run_bench_serving


class VerifyError(AutotuneError):
    """The export cannot be verified as asked (missing files, a setting the site forbids, ...)."""


@dataclass(frozen=True)
class Target:
    """What verify starts: the script, the extra server arguments and variables, and why."""

    script: Path
    kind: str  # "launch" (SGLang) | "rehearsal" (the simulator as measured)
    extra_args: tuple[str, ...]
    extra_env: tuple[tuple[str, str], ...]
    as_measured: bool
    # the study's benchmark-only settings this run goes without (launch.sh, not --as-measured): the study's figures
    # were measured with them, so a difference may be theirs, not the machine's
    left_out: tuple[str, ...] = ()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.verify", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("study_dir", type=Path, help="the study's results folder, e.g. results/speculative")
    p.add_argument(
        "--script",
        choices=["auto", "launch", "rehearsal"],
        default="auto",
        help="auto: rehearse_sim.sh for a study tuned on the simulator, launch.sh otherwise",
    )
    p.add_argument(
        "--as-measured",
        action="store_true",
        help="add the study's benchmark-only settings back (e.g. --load-format dummy where the machine has "
        "no real weights)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HOST for the script (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="PORT for the script (default: a free port)")
    p.add_argument("--ready-timeout", type=float, help="seconds to wait for /health (default: the study's)")
    p.add_argument(
        "--bench-serving",
        action="store_true",
        help="also run `python -m sglang.bench_serving` at every level (needs SGLang installed)",
    )
    p.add_argument(
        "--metrics",
        help=f"metrics that decide the exit status (of {', '.join(METRICS)}; default {', '.join(JUDGED_DEFAULT)}, "
        "and the study's first objective where it is one of them, e.g. goodput)",
    )
    p.add_argument(
        "--tolerance",
        type=float,
        default=0.10,
        help="relative tolerance where the study recorded no interval (default 0.10)",
    )
    p.add_argument("--out", type=Path, help="output folder (default: <study_dir>/verify)")
    p.add_argument(
        "--reexport",
        action="store_true",
        help="first write <study_dir>/best/ again with this version of the export (a study exported by an "
        "older autotune); the records are not changed",
    )
    return p


def load_best(study_dir: Path) -> dict[str, Any]:
    path = study_dir / "best" / "best.json"
    if not path.is_file():
        raise VerifyError(f"{path} not found: is {study_dir} a study folder whose study finished (results/<study>)?")
    doc = _read_json(path)
    if doc.get("best") is None:
        raise VerifyError(f"{path}: the study has no best trial ({doc.get('reason', 'no reason recorded')})")
    if "export" not in doc:
        raise VerifyError(
            f"{path} was written by an older autotune (no `export` section): run verify with --reexport to export "
            "the study again with this version first"
        )
    return doc


def load_plan(study_dir: Path) -> tuple[BenchPlan, float]:
    study = _study(study_dir)
    try:
        return plan_from_json(json.dumps(study["plan"])), float(study.get("ready_timeout_s", 900.0))
    except (KeyError, TypeError, ValueError) as exc:
        raise VerifyError(
            f"{study_dir / 'study.json'}: no bench plan autotune can read ({type(exc).__name__}: {exc}); verify needs "
            "the study.json python -m autotune.search wrote (with this version of autotune)"
        ) from exc


def _study(study_dir: Path) -> dict[str, Any]:
    path = study_dir / "study.json"
    if not path.is_file():
        raise VerifyError(f"{path} not found: verify measures with the study's workload and load levels")
    return _read_json(path)


def _read_json(path: Path) -> dict[str, Any]:
    """A study file's JSON object; VerifyError naming the file when it is cut short, edited or of another tool."""
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise VerifyError(f"{path} is not readable JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise VerifyError(f"{path} is not readable JSON (a {type(doc).__name__}, not an object)")
    return doc


def choose_target(study_dir: Path, doc: dict[str, Any], script: str, as_measured: bool) -> Target:
    export = doc["export"]
    kind = script if script != "auto" else ("rehearsal" if export.get("tuned_on_simulator") else "launch")
    path = study_dir / "best" / ("rehearse_sim.sh" if kind == "rehearsal" else "launch.sh")
    if not path.is_file():
        raise VerifyError(f"{path} not found: the export has no {kind} script")
    extra_args: list[str] = []
    extra_env: list[tuple[str, str]] = []
    left_out: list[str] = []
    if kind == "launch":  # the rehearsal already runs as measured
        for s in export.get("study_only", []):
            if not as_measured:
                left_out.append(s.get("text") or s["name"])
            elif s["kind"] == "env":
                extra_env.append((s["name"], s["value"]))
            else:
                extra_args += [f"--{s['name']}", *([s["value"]] if s["value"] is not None else [])]
    return Target(path, kind, tuple(extra_args), tuple(extra_env), as_measured and kind == "launch", tuple(left_out))


def check_site(doc: dict[str, Any], target: Target) -> None:
    """Refuse to start what the site forbids (a multicast variable of the site changed, NVLS switched on)."""
    section = doc["export"]["rehearsal" if target.kind == "rehearsal" else "production"]
    env = {**section["env"], **section.get("site_env", {}), **dict(target.extra_env)}
    args = [*section["args"], *target.extra_args]
    flags = {a[2:]: True for a in args if a.startswith("--")}
    problems = study_env_problems(env, site_policy()) + nvls_problems(flags, env, site_policy())
    if problems:
        raise VerifyError("the export cannot run on this site: " + "; ".join(problems))


def _open_port(host: str, port: int) -> int:
    """``port`` (0: a free one) when nothing listens there: a server already on it would answer verify's requests while
    the exported one fails to bind."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: a closed run's TIME_WAIT is free
        try:
            s.bind((host, port))
        except OSError as exc:
            if port and exc.errno == errno.EADDRINUSE:
                raise VerifyError(
                    f"--port {port}: something already listens on {host}:{port}, and verify would measure it instead "
                    "of the export; pass another port, or leave --port out for a free one"
                ) from exc
            if port and exc.errno == errno.EACCES:
                raise VerifyError(
                    f"--port {port}: this user may not open it ({exc.strerror or exc}; a port below 1024 needs root); "
                    "pass a port of 1024 or more, or leave --port out for a free one"
                ) from exc
            raise VerifyError(
                f"--host {host}: no port can be opened there ({exc.strerror or exc}); the server starts on this "
                f"machine, so pass one of its addresses (default 127.0.0.1)"
            ) from exc
        return int(s.getsockname()[1])


def launch_spec(target: Target, host: str, port: int, ready_timeout_s: float) -> LaunchSpec:
    """The script as a server: ``bash <script> [-- extra]`` with HOST, PORT and PYTHON set (site variables kept by the
    launcher)."""
    argv = ("bash", str(target.script), *(("--", *target.extra_args) if target.extra_args else ()))
    env = {"HOST": host, "PORT": str(port), "PYTHON": os.environ.get("PYTHON") or sys.executable}
    env.update(dict(target.extra_env))
    return LaunchSpec(
        engine=target.kind, argv=argv, env=env, host=host, port=port, gpus=0, ready_timeout_s=ready_timeout_s
    )


@dataclass(frozen=True)
class StudyBasis:
    """The study's figures a new launch is judged against."""

    levels: list[dict[str, Any]]
    text: str  # what they are, for verify.md
    new_launch: bool  # the levels pool several launches: judge against the interval for one new launch


def study_basis(doc: dict[str, Any]) -> StudyBasis:
    """The study's figures for the exported config, as the report prints them: across the finalist stage's clean
    relaunches of the winner when they give an interval for a new launch (launch-to-launch variation counts), else the
    trial's own launch (its windows)."""
    fin = doc.get("finalists") or {}
    decision = fin.get("decision") or {}
    launches = int(fin.get("winner_launches") or 0)
    number = doc["best"]["number"]
    levels = list(fin.get("winner_levels") or [])
    predicts = any(
        iv.get("new_launch_low") is not None or iv.get("low") is not None
        for lv in levels
        for iv in (lv.get("intervals") or {}).values()
    )
    if levels and predicts and decision.get("winner") == number:
        return StudyBasis(
            levels,
            f"the mean of the {launches} clean finalist relaunch{'es' if launches != 1 else ''} of trial "
            f"{number}; a figure is judged against the 95% interval for one new launch (report.md's 'new "
            "launch': from the launch-to-launch spread of the finalist relaunches)",
            True,
        )
    return StudyBasis(
        list(doc["best"]["levels"]),
        "the trial's own launch: the mean of its windows, with the 95% "
        "interval across windows (within one launch; a new launch varies more)",
        False,
    )


def judged_metrics(study_dir: Path, metrics: str | None, basis: StudyBasis) -> list[str]:
    """``--metrics``, else output tok/s and TPOT median and the study's first objective where verify measures it and
    the study's figures hold it (a study that optimized goodput at a rate level is judged on it: output tok/s there is
    the offered load's). A ``--metrics`` name the study's figures do not hold is an error: it could only fail."""
    held = [m for m in METRICS if any(level_value(lv, m) is not None for lv in basis.levels)]
    if metrics is not None:
        names = metric_names(metrics)
        missing = [m for m in names if m not in held]
        if missing:
            raise VerifyError(
                f"--metrics {', '.join(missing)}: the study's figures do not hold it (they hold "
                f"{', '.join(held) or 'none'}; goodput only where the study set SLOs)"
            )
        return names
    primary = (_study(study_dir).get("objectives") or [{}])[0].get("metric")
    return [*JUDGED_DEFAULT, *([primary] if primary in held and primary not in JUDGED_DEFAULT else [])]


def metric_names(metrics: str) -> list[str]:
    """The names of a comma-separated ``--metrics``."""
    return [m.strip() for m in metrics.split(",") if m.strip()]


def prompts_per_level(doc: dict[str, Any], plan: BenchPlan) -> dict[int, int]:
    """Requests bench_serving sends per level: as many as the study's trial completed there over all its windows
    (at least one window's worth), so both clients load the server for about as long."""
    measured = {int(lv["concurrency"]): int(lv.get("requests") or 0) for lv in doc["best"]["levels"]}
    return {c: max(requests_for_level(plan, c), measured.get(c, 0)) for c in plan.concurrencies}


def check_args(args: argparse.Namespace) -> None:
    """Raises VerifyError for a value verify cannot run with, before anything starts."""
    if is_ipv6(args.host):
        raise VerifyError(f"--host {args.host} is an IPv6 address: {IPV4_ONLY}")
    if not 0 <= args.port <= 65535:
        raise VerifyError(f"--port must be a TCP port, 1-65535 (or 0: a free one), got {args.port}")
    if args.ready_timeout is not None and not args.ready_timeout > 0:
        raise VerifyError(f"--ready-timeout must be a number of seconds above 0, got {args.ready_timeout:g}")
    if not args.tolerance >= 0:
        raise VerifyError(f"--tolerance must be a relative tolerance of 0 or more (0.10: 10%), got {args.tolerance:g}")
    if args.metrics is not None:
        names = metric_names(args.metrics)
        unknown = [m for m in names if m not in METRICS]
        if unknown or not names:
            told = f"unknown metric(s) {', '.join(unknown)}" if unknown else "names no metric"
            raise VerifyError(f"--metrics {told}: use {', '.join(METRICS)} (comma-separated)")


def verify(args: argparse.Namespace) -> tuple[dict[str, Any], tuple[Figure, ...]]:
    check_args(args)
    study_dir: Path = args.study_dir
    if args.reexport:
        reexport(study_dir)
    doc = load_best(study_dir)
    plan, study_ready_s = load_plan(study_dir)
    target = choose_target(study_dir, doc, args.script, args.as_measured)
    check_site(doc, target)
    basis = study_basis(doc)
    judged = judged_metrics(study_dir, args.metrics, basis)
    out_dir: Path = args.out or study_dir / "verify"
    port = _open_port(args.host, args.port)
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = launch_spec(target, args.host, port, args.ready_timeout or study_ready_s)
    for name in ("server.log", "verify.md"):  # this run's only, as verify.json is (an earlier run's would stay
        (out_dir / name).unlink(missing_ok=True)  # beside this run's complete: false verify.json if it is stopped)
    server = ServerProcess(spec, out_dir / "server.log")
    report: dict[str, Any] = {
        "study": doc["study"],
        "trial": doc["best"]["number"],
        "engine_banner": doc["engine_banner"],
        "script": str(target.script),
        "kind": target.kind,
        "as_measured": target.as_measured,
        "extra_args": list(target.extra_args),
        "extra_env": dict(target.extra_env),
        "left_out": list(target.left_out),
        "python": spec.env["PYTHON"],
        "base_url": spec.base_url,
        "site": dict(site_policy().env),
        "load_levels": list(plan.concurrencies),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }

    def checkpoint() -> None:
        """verify.json so far (``complete: false``): a run stopped later keeps what it measured."""
        (out_dir / "verify.json").write_text(json.dumps({**report, "complete": False}, indent=2, default=str) + "\n")

    server.start()
    try:
        try:
            report["ready_s"] = server.wait_ready()
        except LaunchError as exc:
            if exc.kind is not FailureKind.HEALTH_TIMEOUT:
                raise
            raise LaunchError(
                exc.kind,
                f"the server did not answer /health with 200 within {spec.ready_timeout_s:g} s and was stopped; "
                "pass --ready-timeout SECONDS if it is just slow to start (weights, graph capture)",
                exc.log_tail,
            ) from exc
        checkpoint()
        result = run_plan(spec.base_url, plan)
        report["autotune"] = result.to_json()
        checkpoint()
        if args.bench_serving:
            measured: list[dict[str, Any]] = []
            report["bench_serving"] = {"levels": measured}

            def keep(level: dict[str, Any]) -> None:
                measured.append(level)
                checkpoint()

            skipped = _bench_serving(doc, plan, spec.base_url, out_dir, on_level=keep)
            if skipped:
                report["bench_serving"] = {"skipped": skipped}
    finally:
        report["teardown_s"] = server.stop(grace_s=10.0)
        report["server_alive_after_teardown"] = server.alive()
    report["study_basis"] = basis.text
    figures = compare(
        basis.levels, report["autotune"]["levels"], judged=judged, tolerance=args.tolerance, new_launch=basis.new_launch
    )
    report["tolerance"] = args.tolerance
    report["judged"] = judged
    report["figures"] = [{**asdict(f), "ok": f.ok, "rel_diff": f.rel_diff} for f in figures]
    bs_levels = (report.get("bench_serving") or {}).get("levels")
    bs_figures: tuple[Figure, ...] = ()
    if bs_levels:
        bs_figures = tuple(
            f
            for f in compare(
                basis.levels,
                bench_serving_levels(bs_levels),
                judged=judged,
                tolerance=args.tolerance,
                new_launch=basis.new_launch,
            )
            if f.verdict != "not measured"
        )
        report["bench_serving"]["figures"] = [{**asdict(f), "ok": f.ok, "rel_diff": f.rel_diff} for f in bs_figures]
        report["bench_serving"]["vs_autotune_client"] = client_offsets(
            report["autotune"]["levels"], bench_serving_levels(bs_levels)
        )
    report["ok"] = all(f.ok for f in (*figures, *bs_figures))
    return report, figures


def _bench_serving(
    doc: dict[str, Any], plan: BenchPlan, base_url: str, out_dir: Path, on_level: Callable[[dict[str, Any]], None]
) -> str | None:
    """``python -m sglang.bench_serving`` at every level, each result passed to ``on_level`` as it finishes; returns
    why it was skipped, or None when it ran."""
    if not bench_serving_available():
        return "SGLang is not installed here: python -m sglang.bench_serving is unavailable"
    if plan.workload.kind != "synthetic":
        return "the study's workload is a JSONL file; bench_serving runs only the synthetic workload"
    if not plan.concurrencies:
        return "the study's levels are all open-loop (rates); bench_serving runs closed-loop levels (--max-concurrency)"
    production = doc["export"]["production"]["args"]
    if "--model-path" not in production:
        return "no --model-path in the export: bench_serving needs the tokenizer"
    model = production[production.index("--model-path") + 1]
    run_bench_serving(
        plan, base_url, model, out_dir, prompts_per_level(doc, plan), on_level=lambda r: on_level(asdict(r))
    )
    return None


def reexport(study_dir: str | Path) -> Path:
    """Write ``best/`` of a finished study again with this version of the export (``python -m autotune.report``'s
    re-render, from trials.jsonl + study.json)."""
    from autotune.report.render import rerender

    return rerender(Path(study_dir)).export.best_dir


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out_dir: Path = args.out or args.study_dir / "verify"
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        report, figures = verify(args)
    except (AutotuneError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        if isinstance(exc, LaunchError) and exc.log_tail:
            print(exc.log_tail, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        saved = out_dir / "verify.json"
        kept = f"; what it measured before is in {saved} (complete: false)" if saved.exists() else ""
        print(f"\ninterrupted: the server was stopped{kept}", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    (out_dir / "verify.json").write_text(json.dumps({**report, "complete": True}, indent=2, default=str) + "\n")
    text = render_markdown(report, figures)
    (out_dir / "verify.md").write_text(text)
    print(text)
    print(f"written: {out_dir / 'verify.json'}, {out_dir / 'verify.md'}")
    return 0 if report["ok"] else 1


def _sigterm_as_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # the server's process group is torn down by verify's finally


if __name__ == "__main__":
    sys.exit(main())
