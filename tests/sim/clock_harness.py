"""Measure smoke-study configurations on the simulated server through autotune's benchmark client.

Used by ``test_clock.py`` and runnable by hand to print the figures idle vs beside busy loops:
``PYTHONPATH=$PWD python -m tests.sim.clock_harness [--repeats N]``.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from autotune.bench.client import run_plan
from autotune.bench.metrics import metric_value
from autotune.bench.types import BenchPlan
from autotune.engines.base import flags_to_argv
from autotune.space.load import load_study
from autotune.space.sample import to_trial_config

SMOKE = Path(__file__).resolve().parents[2] / "search_spaces" / "smoke.yaml"
# A handful of points of the smoke space: the study's hand-set start, a small cap, a large cap with small graphs, ...
CONFIGS: tuple[dict[str, Any], ...] = (
    {"mem_fraction_static": 0.85, "max_running_requests": 64, "cuda_graph_max_bs_decode": 64},
    {"mem_fraction_static": 0.60, "max_running_requests": 8},
    {"mem_fraction_static": 0.90, "max_running_requests": 128, "cuda_graph_max_bs_decode": 32},
    {"mem_fraction_static": 0.75, "max_running_requests": 24},
)
FIGURES = (
    "output_tok_per_s",
    "ttft_ms.mean",
    "ttft_ms.median",
    "ttft_ms.p99",
    "itl_ms.mean",
    "itl_ms.median",
    "itl_ms.p99",
    "tpot_ms.mean",
    "tpot_ms.median",
    "e2e_ms.mean",
)
READY_DEADLINE_S = 60.0

Figures = dict[tuple[int, str], float]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(SMOKE.parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


@contextmanager
def sim_server(flags: list[str], env: Mapping[str, str] | None = None) -> Iterator[str]:
    """A simulated server process on a free loopback port; yields its URL once ``/health`` answers 200."""
    port = _free_port()
    argv = [sys.executable, "-m", "autotune.sim.server", "--host", "127.0.0.1", "--port", str(port), *flags]
    proc = subprocess.Popen(
        argv,
        env={**_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"sim server exited {proc.returncode} before ready:\n{out[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2.0, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"sim server not ready within {READY_DEADLINE_S} s")
            time.sleep(0.05)  # readiness polling interval
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


@contextmanager
def busy_loops(n: int = 2) -> Iterator[list[int]]:
    """``n`` Python processes spinning ``while True: pass`` beside the measurement; killed (by pid) afterwards."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.2)  # let them reach the loop
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=10)


def smoke_flags(values: Mapping[str, Any], *, time_scale: float, seed: int = 0) -> list[str]:
    """The server flags a smoke-study trial with ``values`` gets, at ``time_scale``."""
    spec = load_study(SMOKE)
    assert spec.sim is not None
    cfg = to_trial_config(spec, values)
    head = ["--sim-profile", spec.sim.profile, "--sim-time-scale", str(time_scale), "--sim-seed", str(seed)]
    head += ["--sim-launch-speedup", "1000", "--model-path", cfg.model_path, "--tp-size", str(cfg.tp_size)]
    return [*head, *flags_to_argv(cfg.flags)]


def measure(values: Mapping[str, Any], *, time_scale: float) -> Figures:
    """Per-level figures of one smoke configuration, on a fresh server, with the smoke study's plan."""
    return measure_flags(smoke_flags(values, time_scale=time_scale), load_study(SMOKE).plan)


def measure_flags(flags: list[str], plan: BenchPlan) -> Figures:
    """Per-level figures of ``plan`` on a fresh simulated server started with ``flags``."""
    with sim_server(flags) as url:
        result = run_plan(url, plan)
    figures: Figures = {}
    for lv in result.levels:
        for name in FIGURES:
            value = metric_value(result, name, lv.concurrency)
            if value is not None:
                figures[(lv.concurrency, name)] = value
    return figures


def worst_deviation(a: Figures, b: Figures) -> tuple[float, tuple[int, str]]:
    """The largest relative difference between two figure sets (keys must match), and where it is."""
    if a.keys() != b.keys():
        raise AssertionError(f"different figures measured: {sorted(a.keys() ^ b.keys())}")
    worst, where = 0.0, (0, "")
    for key, x in a.items():
        y = b[key]
        dev = abs(x - y) / max(abs(x), abs(y), 1e-12)
        if dev > worst:
            worst, where = dev, key
    return worst, where


def _table(idle: list[Figures], busy: list[Figures]) -> str:
    lines = [f"{'config':>6} {'level':>5} {'metric':>16} {'idle':>12} {'busy':>12} {'diff%':>8}"]
    for i, (a, b) in enumerate(zip(idle, busy, strict=True)):
        for key in sorted(a):
            x, y = a[key], b.get(key, float("nan"))
            dev = 100.0 * abs(x - y) / max(abs(x), abs(y), 1e-12)
            lines.append(f"{i:>6} {key[0]:>5} {key[1]:>16} {x:>12.4f} {y:>12.4f} {dev:>8.4f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--time-scale", type=float, default=10.0)
    p.add_argument("--busy", type=int, default=2, help="busy loops beside the second measurement")
    args = p.parse_args(argv)
    for r in range(args.repeats):
        t0 = time.monotonic()
        idle = [measure(c, time_scale=args.time_scale) for c in CONFIGS]
        t1 = time.monotonic()
        with busy_loops(args.busy):
            busy = [measure(c, time_scale=args.time_scale) for c in CONFIGS]
        t2 = time.monotonic()
        print(f"== repeat {r + 1}: idle {t1 - t0:.1f} s wall, busy {t2 - t1:.1f} s wall")
        print(_table(idle, busy), flush=True)
        worst = max(worst_deviation(a, b)[0] for a, b in zip(idle, busy, strict=True))
        print(f"worst relative difference: {100 * worst:.6f}%", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
