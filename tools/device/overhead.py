"""Per-trial overhead of a study: the share of a trial's wall time outside SGLang's own launch and the benchmark.

    python tools/device/overhead.py results/<study> [--json] [--goal 0.03]

Reads ``results/<study>/trials.jsonl`` (the last record per trial number wins, as ``StudyStore.load`` does). For each
trial with ``trial_wall_s``, ``launch_to_ready_s`` and ``bench_s`` in its phases:

    outside  = trial_wall - launch_to_ready - bench          (share = outside / trial_wall)
    deploy   = deploy_to_ready - launch_to_ready              (Ray Serve placement, replica start, preflight, polling)
    replica  = replica_start_s, the part of deploy from serve.run to the replica beginning the launch
    teardown = teardown_s                                     (shutdown of the server, serve.delete, GPU-free check)
    rest     = outside - deploy - teardown                    (validity rules, server info, records)

The total share is sum(outside) / sum(trial_wall) over those trials. Trials without the three timings (rejected before
launch, failed launches) are listed as skipped. Also reported: the study's span from the first start to the last finish
and the seconds in it that no trial covered (Ray Tune scheduling between trials; record timestamps are whole seconds).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autotune.trial.records import TrialRecord  # noqa: E402
from autotune.trial.store import StudyStore  # noqa: E402

GOAL = 0.03


@dataclass(frozen=True)
class TrialOverhead:
    number: int
    trial_id: str
    outcome: str
    wall_s: float
    launch_to_ready_s: float
    bench_s: float
    outside_s: float
    share: float
    deploy_s: float | None  # None when deploy_to_ready was not recorded
    teardown_s: float | None
    rest_s: float
    replica_start_s: float | None = None  # part of deploy: serve.run called -> the replica begins the launch


@dataclass(frozen=True)
class OverheadSummary:
    study: str
    trials: tuple[TrialOverhead, ...]
    skipped: tuple[str, ...]  # "#<number> <trial_id>: <why>"
    wall_s: float
    launch_to_ready_s: float
    bench_s: float
    outside_s: float
    share: float | None
    deploy_s: float
    teardown_s: float
    rest_s: float
    span_s: float | None  # first started_at -> last finished_at, all records
    uncovered_s: float | None  # seconds of the span in no trial's [started_at, finished_at]
    goal: float = GOAL
    replica_start_s: float = 0.0  # sum over the trials that recorded it

    @property
    def meets_goal(self) -> bool | None:
        return None if self.share is None else self.share <= self.goal

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "meets_goal": self.meets_goal}


def trial_overhead(rec: TrialRecord) -> TrialOverhead | str:
    """The overhead of one trial, or why it cannot be computed."""
    ph = rec.phases
    missing = [n for n in ("trial_wall_s", "launch_to_ready_s", "bench_s") if getattr(ph, n) is None]
    if missing:
        return f"no {', '.join(missing)} ({rec.outcome.value}{', ' + rec.failure.value if rec.failure else ''})"
    wall, ready, bench = float(ph.trial_wall_s), float(ph.launch_to_ready_s), float(ph.bench_s)  # type: ignore[arg-type]
    if wall <= 0:
        return f"trial_wall_s is {wall}"
    outside = wall - ready - bench
    deploy = None if ph.deploy_to_ready_s is None else float(ph.deploy_to_ready_s) - ready
    teardown = None if ph.teardown_s is None else float(ph.teardown_s)
    return TrialOverhead(
        number=rec.number,
        trial_id=rec.trial_id,
        outcome=rec.outcome.value,
        wall_s=wall,
        launch_to_ready_s=ready,
        bench_s=bench,
        outside_s=outside,
        share=outside / wall,
        deploy_s=deploy,
        teardown_s=teardown,
        rest_s=outside - (deploy or 0.0) - (teardown or 0.0),
        replica_start_s=None if ph.replica_start_s is None else float(ph.replica_start_s),
    )


def _parse_time(text: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def span_and_gaps(records: Sequence[TrialRecord]) -> tuple[float | None, float | None]:
    """The study's span and the seconds of it that no trial interval covers."""
    intervals = []
    for rec in records:
        start, end = _parse_time(rec.started_at), _parse_time(rec.finished_at)
        if start is not None and end is not None and end >= start:
            intervals.append((start.timestamp(), end.timestamp()))
    if not intervals:
        return None, None
    intervals.sort()
    covered, cur_start, cur_end = 0.0, intervals[0][0], intervals[0][1]
    for start, end in intervals[1:]:
        if start > cur_end:
            covered += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    covered += cur_end - cur_start
    span = max(end for _, end in intervals) - intervals[0][0]
    return span, span - covered


def summarize(records: Sequence[TrialRecord], *, study: str = "", goal: float = GOAL) -> OverheadSummary:
    trials: list[TrialOverhead] = []
    skipped: list[str] = []
    for rec in records:
        item = trial_overhead(rec)
        if isinstance(item, str):
            skipped.append(f"#{rec.number} {rec.trial_id}: {item}")
        else:
            trials.append(item)
    wall = sum(t.wall_s for t in trials)
    outside = sum(t.outside_s for t in trials)
    span, uncovered = span_and_gaps(records)
    return OverheadSummary(
        study=study or (records[0].study if records else ""),
        trials=tuple(trials),
        skipped=tuple(skipped),
        wall_s=wall,
        launch_to_ready_s=sum(t.launch_to_ready_s for t in trials),
        bench_s=sum(t.bench_s for t in trials),
        outside_s=outside,
        share=outside / wall if wall > 0 else None,
        deploy_s=sum(t.deploy_s or 0.0 for t in trials),
        teardown_s=sum(t.teardown_s or 0.0 for t in trials),
        rest_s=sum(t.rest_s for t in trials),
        span_s=span,
        uncovered_s=uncovered,
        goal=goal,
        replica_start_s=sum(t.replica_start_s or 0.0 for t in trials),
    )


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def format_table(s: OverheadSummary) -> str:
    head = (
        f"{'trial':>5} {'id':10} {'outcome':9} {'wall_s':>8} {'ready_s':>8} {'bench_s':>8} {'outside_s':>9} "
        f"{'share':>6} {'deploy_s':>8} {'replica_s':>9} {'teardown_s':>10} {'rest_s':>7}"
    )
    lines = [f"study {s.study}: overhead outside SGLang's launch-to-ready and the benchmark", head]
    for t in s.trials:
        lines.append(
            f"{t.number:>5} {t.trial_id[:10]:10} {t.outcome:9} {t.wall_s:>8.1f} {t.launch_to_ready_s:>8.1f} "
            f"{t.bench_s:>8.1f} {t.outside_s:>9.1f} {_pct(t.share):>6} {_f(t.deploy_s):>8} "
            f"{_f(t.replica_start_s, 2):>9} {_f(t.teardown_s):>10} {t.rest_s:>7.1f}"
        )
    verdict = {True: "meets", False: "MISSES", None: "cannot check"}[s.meets_goal]
    lines.append(
        f"{'total':>5} {len(s.trials):>3} trials{'':9} {s.wall_s:>8.1f} {s.launch_to_ready_s:>8.1f} {s.bench_s:>8.1f} "
        f"{s.outside_s:>9.1f} {_pct(s.share):>6} {s.deploy_s:>8.1f} {s.replica_start_s:>9.2f} {s.teardown_s:>10.1f} "
        f"{s.rest_s:>7.1f}"
    )
    lines.append(f"overhead share {_pct(s.share)}: {verdict} the goal of at most {_pct(s.goal)}")
    if s.span_s is not None:
        lines.append(
            f"study span {s.span_s:.0f} s from the first start to the last finish; {_f(s.uncovered_s, 0)} s "
            f"of it in no trial (scheduling between trials; timestamps are whole seconds)"
        )
    lines.extend(f"skipped {item}" for item in s.skipped)
    return "\n".join(lines)


def records_path(target: Path) -> Path:
    return target / "trials.jsonl" if target.is_dir() else target


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python tools/device/overhead.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("study", type=Path, help="results/<study> directory, or its trials.jsonl")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--goal", type=float, default=GOAL, help=f"largest acceptable share (default {GOAL})")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    path = records_path(args.study)
    if not path.is_file():
        print(f"error: {path} not found: give a study directory under results/ (or its trials.jsonl)", file=sys.stderr)
        return 2
    store = StudyStore(path.parent)
    records = store.load() if path.name == "trials.jsonl" else _load_file(path)
    if not records:
        print(f"error: {path} holds no trial records", file=sys.stderr)
        return 2
    summary = summarize(records, goal=args.goal)
    print(json.dumps(summary.to_json(), indent=2) if args.json else format_table(summary))
    return 0


def _load_file(path: Path) -> list[TrialRecord]:
    """Records from a JSONL file of another name (last per trial number wins; unreadable lines skipped)."""
    by_number: dict[int, TrialRecord] = {}
    for raw in path.read_text().splitlines():
        try:
            rec = TrialRecord.from_json(json.loads(raw))
        except (ValueError, TypeError, KeyError):
            continue
        by_number[rec.number] = rec
    return [by_number[k] for k in sorted(by_number)]


if __name__ == "__main__":
    sys.exit(main())
