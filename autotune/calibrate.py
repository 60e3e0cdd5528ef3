"""``python -m autotune.calibrate --profile NAME [--json]``: measure a profile's reference table on the simulated engine.

Each configuration is launched through autotune's own launcher (``autotune.trial.launcher.launched``) and measured with its
own benchmark (``autotune.bench.client.run_plan``), exactly as a study would; the figures are printed beside the
numbers they are calibrated to (``USER_STORY.md`` for the Kimi profile, the device README for the H200 ones).
Everything measured here is SIMULATED. Exit status 1 when a cell is off by more than the tolerance (15%).
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

TOLERANCE = 0.15
# Simulated seconds per wall second. The figures come from the simulator's virtual clock, so the scale only sets how long
# a calibration takes (docs/simulator.md, "Time: the virtual clock").
TIME_SCALE = 50.0


@dataclass(frozen=True)
class Target:
    metric: str  # "tok_s@C" (output tok/s at concurrency C), "peak_tok_s", "per_request_tok_s@1", "accept_rate", ...
    reported: float
    source: str


@dataclass(frozen=True)
class Case:
    config: str
    flags: dict[str, object]
    env: dict[str, str]
    concurrencies: tuple[int, ...]
    targets: tuple[Target, ...]


@dataclass(frozen=True)
class Workload:
    input_len: int
    output_len: int
    min_requests: int  # per level (C=1 runs this many requests one after another)
    rounds: int


@dataclass(frozen=True)
class Suite:
    profile: str
    model_path: str
    tp_size: int
    workload: Workload
    cases: tuple[Case, ...]


@dataclass(frozen=True)
class Row:
    config: str
    metric: str
    reported: float
    measured: float | None
    rel_err: float | None
    ok: bool
    source: str


@dataclass
class Report:
    profile: str
    rows: list[Row] = field(default_factory=list)
    tolerance: float = TOLERANCE
    simulated: bool = True
    workload: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and all(r.ok for r in self.rows)


_STORY = "USER_STORY.md"
_README = "device README"
_EAGLE = {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 3, "speculative-eagle-topk": 1}
_EAGLE_4 = {**_EAGLE, "speculative-num-draft-tokens": 4}

SUITES: dict[str, Suite] = {
    "kimi-k2.5-int4-8x-rtxpro6000": Suite(
        profile="kimi-k2.5-int4-8x-rtxpro6000",
        model_path="moonshotai/Kimi-K2.5",
        tp_size=8,
        workload=Workload(input_len=128, output_len=512, min_requests=2, rounds=1),
        cases=(
            Case(
                "sglang-no-spec",
                {"mem-fraction-static": 0.85, "trust-remote-code": True},
                {},
                (1, 128),
                (Target("tok_s@1", 63.6, _STORY), Target("tok_s@128", 2370.0, _STORY)),
            ),
            Case(
                "eagle3-public-k2-drafter",
                {"mem-fraction-static": 0.85, "speculative-draft-model-path": "public-k2-eagle3", **_EAGLE_4},
                {},
                (1, 128),
                (
                    Target("peak_tok_s", 849.0, _STORY + " (48 running requests)"),
                    Target("accept_rate", 0.42, _STORY + " (~42%; accept length / draft tokens)"),
                ),
            ),
            Case(
                "eagle3-custom-k25-drafter",
                {"mem-fraction-static": 0.85, "speculative-draft-model-path": "custom-k25-eagle3", **_EAGLE_4},
                {},
                (1, 128),
                (
                    Target("tok_s@1", 40.8, _STORY),
                    Target("peak_tok_s", 597.0, _STORY),
                    Target("accept_length", 1.0, _STORY),
                ),
            ),
        ),
    ),
    "h200-llama-1b": Suite(
        profile="h200-llama-1b",
        model_path="/tmp/models/llama-1b",
        tp_size=1,
        workload=Workload(input_len=128, output_len=256, min_requests=2, rounds=2),
        cases=(
            Case(
                "base",
                {
                    "load-format": "dummy",
                    "attention-backend": "triton",
                    "mem-fraction-static": 0.8,
                    "cuda-graph-max-bs-decode": 64,
                },
                {},
                (1, 32, 64),
                (
                    Target("per_request_tok_s@1", 804.0, _README + " (797 / 811)"),
                    Target("tok_s@32", 17000.0, _README + " (15.7k / 18.3k)"),
                    Target("tok_s@64", 24950.0, _README + " (27.2k / 22.7k)"),
                ),
            ),
        ),
    ),
    "h200x2-llama-8b": Suite(
        profile="h200x2-llama-8b",
        model_path="/tmp/models/llama-8b",
        tp_size=2,
        workload=Workload(input_len=128, output_len=256, min_requests=2, rounds=2),
        cases=(
            Case(
                "tp2-custom-allreduce",
                {"load-format": "dummy", "disable-prefill-cuda-graph": True},
                {},
                (1, 32, 64),
                (
                    Target("per_request_tok_s@1", 314.0, _README),
                    Target("tok_s@32", 7200.0, _README),
                    Target("tok_s@64", 13100.0, _README),
                ),
            ),
            Case(
                "tp2-nccl-ring-simple",
                {"load-format": "dummy", "disable-prefill-cuda-graph": True, "disable-custom-all-reduce": True},
                {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
                (1, 32, 64),
                (
                    Target("per_request_tok_s@1", 212.0, _README),
                    Target("tok_s@32", 5500.0, _README),
                    Target("tok_s@64", 9900.0, _README),
                ),
            ),
        ),
    ),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _measure(metric: str, bench: object, draft_tokens: int | None) -> float | None:
    from autotune.bench.types import BenchResult

    assert isinstance(bench, BenchResult)
    name, _, level = metric.partition("@")
    if name == "tok_s":
        return bench.level(int(level)).output_tok_per_s
    if name == "peak_tok_s":
        return max(lv.output_tok_per_s for lv in bench.levels)
    if name == "per_request_tok_s":
        tpot = bench.level(int(level)).tpot_ms
        return 1000.0 / tpot.median if tpot and tpot.median > 0 else None
    accept = bench.server_accept_length
    if accept is None:
        accepts = [lv.accept_length for lv in bench.levels if lv.accept_length is not None]
        accept = sum(accepts) / len(accepts) if accepts else None
    if name == "accept_length":
        return accept
    if name == "accept_rate":
        return accept / draft_tokens if accept is not None and draft_tokens else None
    raise ValueError(f"unknown calibration metric {metric!r}")


def run_case(suite: Suite, case: Case, seed: int, log_dir: Path) -> tuple[list[Row], str | None]:
    from autotune.bench.client import run_plan
    from autotune.bench.types import BenchPlan, WorkloadSpec
    from autotune.core.errors import AutotuneError
    from autotune.core.trial import TrialConfig
    from autotune.engines import get_engine
    from autotune.trial.launcher import launched

    flags = {"sim-stream-interval-ms": 40, **case.flags}
    cfg = TrialConfig(model_path=suite.model_path, tp_size=suite.tp_size, flags=flags, env=case.env)  # type: ignore[arg-type]  # the flags are the case's scalars; the dict literal widens them to object
    engine = get_engine("sim", profile=suite.profile, time_scale=TIME_SCALE, seed=seed)
    spec = engine.launch_spec(cfg, port=_free_port())
    w = suite.workload
    plan = BenchPlan(
        workload=WorkloadSpec(input_len=w.input_len, output_len=w.output_len, seed=seed),
        concurrencies=case.concurrencies,
        rounds=w.rounds,
        min_requests=w.min_requests,
        warmup_requests=1,
    )
    draft = case.flags.get("speculative-num-draft-tokens")
    try:
        with launched(spec, log_dir / f"{case.config}.log") as server:
            bench = run_plan(server.base_url, plan)
    except AutotuneError as exc:
        return [Row(case.config, t.metric, t.reported, None, None, False, t.source) for t in case.targets], str(exc)
    rows = []
    for t in case.targets:
        measured = _measure(t.metric, bench, int(draft) if isinstance(draft, int) else None)
        err = None if measured is None else (measured - t.reported) / t.reported
        rows.append(
            Row(case.config, t.metric, t.reported, measured, err, err is not None and abs(err) <= TOLERANCE, t.source)
        )
    return rows, None


def calibrate(profile: str, seed: int = 0, only: Sequence[str] = ()) -> Report:
    if profile not in SUITES:
        raise SystemExit(f"no calibration table for profile {profile!r}; known: {', '.join(sorted(SUITES))}")
    suite = SUITES[profile]
    report = Report(profile=profile, workload=asdict(suite.workload))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="autotune-calibrate-") as tmp:
        for case in suite.cases:
            if only and case.config not in only:
                continue
            rows, error = run_case(suite, case, seed, Path(tmp))
            report.rows.extend(rows)
            if error:
                report.errors.append(f"{case.config}: {error}")
    report.wall_s = round(time.monotonic() - t0, 2)
    return report


def format_table(report: Report) -> str:
    lines = [
        f"Calibration of sim profile {report.profile} (SIMULATED figures; tolerance {report.tolerance:.0%})",
        f"workload: {report.workload}",
        f"{'config':28} {'metric':22} {'reported':>10} {'measured':>10} {'error':>8}  ok",
    ]
    for r in report.rows:
        m = "-" if r.measured is None else f"{r.measured:10.2f}"
        e = "-" if r.rel_err is None else f"{r.rel_err:+.1%}"
        lines.append(f"{r.config:28} {r.metric:22} {r.reported:10.2f} {m:>10} {e:>8}  {'yes' if r.ok else 'NO'}")
    lines += [f"error: {e}" for e in report.errors]
    lines.append(f"{'PASS' if report.ok else 'FAIL'} in {report.wall_s:.1f} s wall")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autotune.calibrate", description=__doc__.splitlines()[0])
    p.add_argument("--profile", default="kimi-k2.5-int4-8x-rtxpro6000", choices=sorted(SUITES))
    p.add_argument("--json", action="store_true", help="print exactly one JSON object")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", nargs="*", default=(), help="run only these configurations")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    known = [case.config for case in SUITES[args.profile].cases]
    unknown = [name for name in args.only if name not in known]
    if unknown:  # a check of nothing would PASS
        print(
            f"error: --only {' '.join(unknown)}: not a configuration of the {args.profile} table; use any of "
            f"{', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    if args.seed < 0:
        print(f"error: --seed must be 0 or more, got {args.seed}", file=sys.stderr)
        return 2
    report = calibrate(args.profile, seed=args.seed, only=args.only)
    if args.json:
        out = asdict(report)
        out["ok"] = report.ok
        print(json.dumps(out))
    else:
        print(format_table(report))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
