"""A short simulated study, watched as an operator would: progress lines (start n of N, phases, ETA) and no Ray/Tune
chatter on the console, the study's metrics read from the running Ray cluster's Prometheus endpoint while it runs,
and the --json summary at the end."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import free_port

pytestmark = pytest.mark.slow

STUDY = {
    "study": {
        "name": "op",
        "engine": "sim",
        "trials": 3,
        "seed": 3,
        "objectives": [{"metric": "output_tok_per_s", "level": "max", "direction": "maximize"}],
        "points_to_evaluate": [{"mem_fraction_static": 0.8}, {"mem_fraction_static": 0.01}],
    },
    "server": {"model_path": "dummy-llama-1b", "tp_size": 1},
    "sim": {"profile": "h200-llama-1b", "time_scale": 10},
    "workload": {"kind": "synthetic", "input_len": 64, "output_len": 32},
    "load_levels": [1, 4],
    "bench": {"rounds": 1, "warmup_requests": 1, "min_requests": 4},
    # 0.01 cannot hold the weights: a failure the metrics count by kind
    "params": {
        "mem_fraction_static": {"flag": "mem-fraction-static", "type": "categorical", "choices": [0.01, 0.8, 0.85]}
    },
}
CHATTER = (
    "Configuration for experiment",
    "TensorBoard",
    "graceful_shutdown",
    "authentication",
    "(raylet)",
    "Started a local Ray instance",
    "tune.py",
    "View detailed results",
)


def _scrape(port: int, seen: list[str], stop: threading.Event) -> None:
    with httpx.Client(timeout=5, trust_env=False) as client:
        while not stop.is_set():
            try:
                text = client.get(f"http://127.0.0.1:{port}/metrics").text
                seen.extend(line for line in text.splitlines() if line.startswith("ray_autotune_"))
            except httpx.HTTPError:
                pass
            stop.wait(0.5)


def _value(lines: list[str], name: str, **labels: str) -> list[float]:
    out = []
    for line in lines:
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            out.append(float(line.rsplit(" ", 1)[1]))
    return out


def test_operator_view_progress_metrics_and_json(tmp_path: Path) -> None:
    space = tmp_path / "op.yaml"
    space.write_text(yaml.safe_dump(STUDY))
    results = tmp_path / "results"
    metrics_port = free_port()
    seen: list[str] = []
    stop = threading.Event()
    scraper = threading.Thread(target=_scrape, args=(metrics_port, seen, stop), daemon=True)
    scraper.start()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_metrics_report_interval_ms": "1000"}
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "autotune.search",
                "--space",
                str(space),
                "--finalists",
                "0",
                "--results-dir",
                str(results),
                "--num-gpus",
                "2",
                "--metrics-port",
                str(metrics_port),
                "--dashboard-port",
                str(free_port()),
                "--serve-port",
                str(free_port()),
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=400,
            env=env,
        )
    finally:
        stop.set()
        scraper.join(10)
    console = proc.stderr  # with --json the progress goes to stderr, the summary to stdout
    assert proc.returncode == 0, console[-6000:]

    # progress: start lines with n of N and params, the phases, an ETA once a trial has finished
    assert re.search(r"trial +0 started \[[12]/3\]  mem_fraction_static=0.8 ", console), (
        console
    )  # two run at once: either starts first
    assert re.search(r"trial +\d started \[3/3\]", console), console
    for phase in (
        "launching the engine",
        "ready after",
        "benchmarking level 1 of 2 (concurrency 1)",
        "benchmarking level 2 of 2 (concurrency 4)",
        "tearing down",
    ):
        assert phase in console, (phase, console)
    assert re.search(r"progress: 1/3 done, \d running, 2 left; ETA \d+s", console), console
    for noise in CHATTER:
        assert noise not in console, (noise, console)
    ray_log = (results / "op" / "logs" / "ray-console.log").read_text()
    assert "Configuration for experiment" in ray_log  # Tune's box went to the log, not away

    # the study's metrics, read from the Ray node's Prometheus endpoint while the study ran
    assert seen, "no autotune metric was ever exported"
    assert max(_value(seen, "ray_autotune_trials_finished_total", study="op", outcome="complete"), default=0) >= 1
    assert (
        max(
            _value(seen, "ray_autotune_trials_finished_total", study="op", outcome="failed", failure="oom_at_launch"),
            default=0,
        )
        >= 1
    )
    assert max(_value(seen, "ray_autotune_trials_planned", study="op"), default=0) == 3
    assert max(_value(seen, "ray_autotune_best_objective", study="op", objective="output_tok_per_s@max"), default=0) > 0
    running = [
        v
        for phase in ("started", "launching", "ready", "benchmarking", "tearing_down")
        for v in _value(seen, "ray_autotune_running_trials", study="op", phase=phase)
    ]
    assert running and max(running) >= 1, "no running trial was ever seen in a phase"
    assert _value(seen, "ray_autotune_last_trial_output_tok_per_s", study="op", concurrency="4")

    summary = json.loads(proc.stdout)
    assert summary["study"] == "op" and summary["exit_code"] == 0 and summary["simulated"] is True
    assert summary["trials"]["total"] == 3 and summary["trials"]["failures_by_kind"] == {"oom_at_launch": 1}
    assert summary["best"]["params"]["mem_fraction_static"] in (0.8, 0.85)
    assert "report.md" in summary["files"]
