"""Per-trial timeline of a study's GPU slots, read from Ray's own logs: an overhead bound that needs no trial records.

    python tools/device/serve_timeline.py RAYLOGS_DIR [--json] [--goal 0.03]

``RAYLOGS_DIR`` is a Ray session's ``logs/`` folder (``run_call_b.sh`` packs it as ``study-<name>/raylogs``). Three
kinds of lines are read, all written by Ray Serve itself:

- the trainable's ``serve.run``: ``Connecting to existing Serve app ...`` (the call starts) and the next
  ``Application '<app>' is ready`` (it returned): one deploy of a trial onto slot ``<app>``;
- the slot replica's request log (``:actor_name:ServeReplica:<app>:EngineServer``): ``CALL wait_ready OK <ms>``,
  ``CALL benchmark OK <ms>``, ``CALL stop_server OK <ms>``; the k-th ``wait_ready`` of a slot belongs to its k-th deploy;
- the controller's ``Adding 1 replica`` (a new replica) or ``Updating 1 replicas ... outdated deployment configs`` (the
  live replica reconfigured in place) per deploy.

Per trial, ``cycle`` runs from its ``serve.run`` to the next ``serve.run`` on the same slot (the slot's last trial: to
its ``stop_server`` returning), so Tune's scheduling between trials is inside it. Then

    outside = cycle - wait_ready - benchmark

is an UPPER BOUND of the overhead the issue defines (outside SGLang's launch-to-ready and the benchmark): the server
process starts inside ``serve.run`` (the replica's ``reconfigure`` launches it), so the seconds of SGLang's launch that
fall before ``wait_ready`` is called are counted as overhead here. Trial records (``overhead.py``) give the exact split.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

GOAL = 0.03
_TS = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})"
_CONNECT = re.compile(_TS + r" serve \d+ -- Connecting to existing Serve app")
_READY = re.compile(_TS + r" serve \d+ -- Application '([^']+)' is ready")
_CALL = re.compile(_TS + r" (\S+)_EngineServer \S+ \S+ -- CALL (\w+) OK ([\d.]+)ms")
_CONTROLLER = re.compile(
    _TS + r" controller \d+ -- (Adding \d+ replica|Updating \d+ replicas) (?:of|to) Deployment\(name='EngineServer', "
    r"app='([^']+)'\)"
)


def _t(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=dt.timezone.utc).timestamp()


@dataclass(frozen=True)
class SlotTrial:
    slot: str
    index: int  # the k-th trial on this slot
    started_at: str  # serve.run called (Ray's log time)
    replica: str  # "new" | "reused" | "?"
    deploy_s: float  # serve.run called -> returned (includes starting the server process)
    wait_ready_s: float
    bench_s: float | None  # None: the trial ended before a benchmark (a failed launch)
    cycle_s: float
    outside_s: float
    share: float


@dataclass(frozen=True)
class Timeline:
    trials: tuple[SlotTrial, ...]
    cycle_s: float
    outside_s: float
    share: float  # over the trials that ran a benchmark (completed)
    reused_share: float | None  # the same, over completed trials on a reused replica


def read_lines(logs: Path) -> Iterable[tuple[str, str]]:
    """(file name, line) for every line of every log file in ``logs``."""
    for path in sorted(p for p in logs.iterdir() if p.is_file()):
        for line in path.read_text(errors="replace").splitlines():
            yield path.name, line


def build(lines: Iterable[tuple[str, str]]) -> Timeline:
    deploys: dict[str, list[tuple[float, float, str]]] = {}  # slot -> [(start, returned, start stamp)]
    calls: dict[str, list[tuple[float, str, float]]] = {}  # slot -> [(end time, method, seconds)]
    kinds: dict[str, list[tuple[float, str]]] = {}  # slot -> [(time, "new" | "reused")]
    pending: dict[str, tuple[float, str]] = {}  # log file -> an unanswered serve.run
    for name, line in lines:
        if m := _CONNECT.search(line):
            pending[name] = (_t(m.group(1)), m.group(1))
        elif (m := _READY.search(line)) and name in pending:
            start, stamp = pending.pop(name)
            deploys.setdefault(m.group(2), []).append((start, _t(m.group(1)), stamp))
        elif m := _CALL.search(line):
            calls.setdefault(m.group(2), []).append((_t(m.group(1)), m.group(3), float(m.group(4)) / 1000))
        elif m := _CONTROLLER.search(line):
            kinds.setdefault(m.group(3), []).append(
                (_t(m.group(1)), "new" if m.group(2).startswith("Adding") else "reused")
            )
    trials: list[SlotTrial] = []
    for slot, runs in sorted(deploys.items()):
        runs.sort()
        slot_calls = sorted(calls.get(slot, []))
        slot_kinds = sorted(kinds.get(slot, []))
        for k, (start, returned, stamp) in enumerate(runs):
            nxt = runs[k + 1][0] if k + 1 < len(runs) else None
            mine = [c for c in slot_calls if c[0] >= start and (nxt is None or c[0] < nxt)]
            wait = next((s for _, meth, s in mine if meth == "wait_ready"), None)
            if wait is None:
                continue  # no wait_ready logged for this deploy: the replica's log was cut or lost
            bench = next((s for _, meth, s in mine if meth == "benchmark"), None)
            stop_end = next((t for t, meth, _ in mine if meth == "stop_server"), None)
            end = nxt if nxt is not None else stop_end
            if end is None:
                continue
            kind = next((kd for t, kd in slot_kinds if start - 1 <= t <= returned + 1), "?")
            cycle = end - start
            outside = cycle - wait - (bench or 0.0)
            trials.append(
                SlotTrial(
                    slot=slot, index=k, started_at=stamp, replica=kind, deploy_s=returned - start, wait_ready_s=wait,
                    bench_s=bench, cycle_s=cycle, outside_s=outside, share=outside / cycle if cycle > 0 else 0.0,
                )
            )  # fmt: skip
    trials.sort(key=lambda t: t.started_at)
    done = [t for t in trials if t.bench_s is not None]
    reused = [t for t in done if t.replica == "reused"]

    def share(ts: Sequence[SlotTrial]) -> float | None:
        total = sum(t.cycle_s for t in ts)
        return sum(t.outside_s for t in ts) / total if total > 0 else None

    return Timeline(
        trials=tuple(trials),
        cycle_s=sum(t.cycle_s for t in done),
        outside_s=sum(t.outside_s for t in done),
        share=share(done) or 0.0,
        reused_share=share(reused),
    )


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(tl: Timeline, goal: float = GOAL) -> str:
    rows = [
        "| slot | # | serve.run at (UTC) | replica | serve.run (s) | wait_ready (s) | benchmark (s) | cycle (s) "
        "| outside, at most (s) | share |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in tl.trials:
        rows.append(
            f"| {t.slot} | {t.index} | {t.started_at} | {t.replica} | {_s(t.deploy_s)} | {_s(t.wait_ready_s)} | "
            f"{_s(t.bench_s)} | {_s(t.cycle_s)} | {_s(t.outside_s)} | {100 * t.share:.1f}% |"
        )
    done = sum(1 for t in tl.trials if t.bench_s is not None)
    verdict = "meets" if tl.share <= goal else "MISSES"
    rows += [
        "",
        f"completed trials: {done}; outside at most {tl.outside_s:.1f} s of {tl.cycle_s:.1f} s = {100 * tl.share:.1f}% "
        f"({verdict} the goal of at most {100 * goal:g}%)",
    ]
    if tl.reused_share is not None:
        rows.append(f"completed trials on a reused replica: {100 * tl.reused_share:.1f}%")
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", type=Path, help="a Ray session's logs folder")
    p.add_argument("--json", action="store_true")
    p.add_argument("--goal", type=float, default=GOAL)
    args = p.parse_args(argv)
    if not args.logs.is_dir():
        print(f"error: {args.logs} is not a folder (give a Ray session's logs/ folder)", file=sys.stderr)
        return 2
    tl = build(read_lines(args.logs))
    if not tl.trials:
        print(
            f"error: no GPU-slot trials in the Ray logs under {args.logs} (is this a study's session?)", file=sys.stderr
        )
        return 1
    print(json.dumps(asdict(tl), indent=2) if args.json else format_table(tl, args.goal), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
