"""One real study end to end: `python -m autotune.search` -> Ray Tune + Optuna -> Ray Serve apps -> simulated servers.

While it runs, the Ray dashboard's Serve API must list the study's GPU slot applications with the trials they run. Then the
results directory must
hold the Optuna database, one record per trial and the exported best config; a second run resumes without re-running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import optuna
import pytest
import yaml

from tests.conftest import free_port

pytestmark = pytest.mark.slow

STUDY = {
    "study": {
        "name": "e2e",
        "engine": "sim",
        "trials": 4,
        "seed": 1,
        "objectives": [{"metric": "output_tok_per_s", "level": "max", "direction": "maximize"}],
        "constraints": [{"metric": "ttft_ms.p99", "level": "max", "max": 60000}],
        "finalists": {"count": 2, "rounds": 1},
    },
    "server": {"model_path": "dummy-llama-1b", "tp_size": 1},
    "sim": {"profile": "h200-llama-1b", "time_scale": 10},
    "workload": {"kind": "synthetic", "input_len": 64, "output_len": 32},
    "load_levels": [1, 4],
    "bench": {"rounds": 1, "warmup_requests": 1, "min_requests": 4, "max_windows": 2},
    "params": {
        "cuda_graph_max_bs": {"flag": "cuda-graph-max-bs-decode", "type": "categorical", "choices": [8, 64]},
        # 0.01 cannot hold the weights: a launch failure the study must record and survive
        "mem_fraction_static": {"flag": "mem-fraction-static", "type": "categorical", "choices": [0.01, 0.8]},
    },
    "points_to_evaluate": [],
}
# This file's study: more graph sizes (six points worth a launch), and 0.01 as a seed point, since the searcher itself
# sets points predicted not to fit aside (the study's own seed is launched, last)
E2E_STUDY = {
    **STUDY,
    "params": {
        **STUDY["params"],
        "cuda_graph_max_bs": {
            "flag": "cuda-graph-max-bs-decode",
            "type": "categorical",
            "choices": [8, 16, 32, 48, 64],
        },
    },
    "points_to_evaluate": [{"cuda_graph_max_bs": 8, "mem_fraction_static": 0.01}],
}


def _token_headers() -> dict[str, str]:
    token = Path.home() / ".ray" / "auth_token"
    return {"Authorization": f"Bearer {token.read_text().strip()}"} if token.exists() else {}


def _watch_serve_apps(port: int, seen: set[str], stop: threading.Event) -> None:
    url = f"http://127.0.0.1:{port}/api/serve/applications/"
    with httpx.Client(timeout=5, trust_env=False) as client:
        while not stop.is_set():
            try:
                r = client.get(url, headers=_token_headers())
                if r.status_code == 200:
                    # each GPU slot app carries the trial it runs as its deployment's user_config
                    for app, detail in (r.json().get("applications") or {}).items():
                        for dep in ((detail or {}).get("deployments") or {}).values():
                            user = ((dep or {}).get("deployment_config") or {}).get("user_config") or {}
                            if (
                                app.startswith("e2e-")
                                and "-slot-" in app
                                and str(user.get("name", "")).startswith("trial-")
                            ):
                                seen.add(f"{app}:{user['name']}")
            except (httpx.HTTPError, ValueError):
                pass
            stop.wait(1.0)  # a trial holds its slot for seconds; each poll costs the dashboard a Serve controller call


def _run(space: Path, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    dash = free_port()
    seen: set[str] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=_watch_serve_apps, args=(dash, seen, stop), daemon=True)
    watcher.start()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "autotune.search",
                "--space",
                str(space),
                "--results-dir",
                str(results),
                "--dashboard-port",
                str(dash),
                "--serve-port",
                str(free_port()),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=480,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        stop.set()
        watcher.join(5)
    proc.seen_apps = seen  # type: ignore[attr-defined]
    return proc


def test_study_end_to_end_and_resume(tmp_path: Path) -> None:
    space = tmp_path / "e2e.yaml"
    space.write_text(yaml.safe_dump(E2E_STUDY))
    results = tmp_path / "results"
    t0 = time.monotonic()
    proc = _run(space, results)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "Ray dashboard: http://127.0.0.1:" in out
    seen = proc.seen_apps  # type: ignore[attr-defined]
    assert seen, f"the dashboard's Serve API never listed a trial on a GPU slot application\n{out[-3000:]}"

    root = results / "e2e"
    lines = (root / "trials.jsonl").read_text().splitlines()
    records = [json.loads(x) for x in lines]
    assert len(records) == 4
    outcomes = {r["outcome"] for r in records}
    assert "complete" in outcomes
    for r in records:
        if r["params"]["mem_fraction_static"] == 0.01:
            assert r["outcome"] == "failed" and r["failure"] == "oom_at_launch", r
            assert "mem-fraction-static" in r["log_tail"]
        else:
            assert r["outcome"] == "complete"
            assert r["engine"]["simulated"] is True and r["engine"]["engine"] == "sim"
            assert [lv["concurrency"] for lv in r["bench"]["levels"]] == [1, 4]
            assert "--mem-fraction-static" in r["argv"]

    # every trial ran on one of the study's slot apps, and a slot's replica was reused for a later trial
    assert all(r["engine"]["serve_app"].startswith("e2e-") for r in records), [r["engine"] for r in records]
    assert max(r["engine"]["replica_launches"] or 0 for r in records) > 1, [r["engine"] for r in records]
    assert len({name.split(":")[1] for name in seen}) >= 2, seen  # the dashboard showed the slot change trials

    study = optuna.load_study(study_name="e2e", storage=f"sqlite:///{root / 'study.db'}")
    measured = [
        t for t in study.trials if "skipped" not in t.user_attrs
    ]  # repeats and screened proposals: not launched
    assert len(measured) == 4 and all(t.state == optuna.trial.TrialState.COMPLETE for t in measured)

    best = json.loads((root / "best" / "best.json").read_text())
    launch = (root / "best" / "launch.sh").read_text()
    assert best["best"] is not None
    dry = subprocess.run(
        ["bash", str(root / "best" / "launch.sh"), "--dry-run"], capture_output=True, text=True, timeout=30
    )
    assert dry.returncode == 0
    assert "--mem-fraction-static 0.8" in dry.stdout or "--mem-fraction-static' '0.8" in dry.stdout, dry.stdout
    # a study tuned on the simulator exports the SGLang command, and the simulator as measured beside it
    assert "sglang.launch_server" in launch and "autotune.sim.server" not in launch
    assert "autotune.sim.server" in (root / "best" / "rehearse_sim.sh").read_text()

    # the finalist stage: the top 2 feasible configs relaunched once each, stored apart from the trials and never told
    # to the sampler (the Optuna study still holds 4 measured trials); best.json says how the winner was decided
    runs = [json.loads(x) for x in (root / "finalists.jsonl").read_text().splitlines()]
    feasible = sorted((r for r in records if r["feasible"]), key=lambda r: -r["objectives"]["output_tok_per_s@max"])
    assert [r["repeats"] for r in runs] == [r["number"] for r in feasible[:2]], runs
    assert all(r["kind"] == "finalist" and r["stage"] == 1 and r["round"] == 1 for r in runs)
    assert all(r["record"]["trial_id"] == f"{r['repeats_trial_id']}-f1r1" for r in runs)
    assert all(r["record"]["engine"]["serve_app"].startswith("e2e-") for r in runs)  # the same slots as trials
    assert best["decided_by"] in ("separable", "tie", "single"), best["reason"]
    assert best["finalists"]["decision"]["method"] == best["decided_by"]
    assert best["reason"].startswith("finalist stage: ")
    assert "## How the winner was decided" in (root / "best" / "report.md").read_text()
    assert "finalist stage 1 round 1: trial" in out
    # the relaunches report their phases as trials do, labelled as relaunches
    tid = runs[0]["record"]["trial_id"]
    assert f"finalist relaunch of trial {runs[0]['repeats']} [{tid}] started [1/2]" in out, out[-3000:]
    assert f"finalist relaunch of trial {runs[0]['repeats']} [{tid}] tearing down" in out

    # resume: two more trials requested, four finished ones kept and not re-run
    proc2 = _run(space, results, "--trials", "6")
    out2 = proc2.stdout + proc2.stderr
    assert proc2.returncode == 0, out2[-6000:]
    assert "4 finished trial(s) kept" in out2
    records2 = [json.loads(x) for x in (root / "trials.jsonl").read_text().splitlines()]
    assert len(records2) == 6
    assert [r["trial_id"] for r in records2[:4]] == [r["trial_id"] for r in records]
    runs2 = (root / "finalists.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in runs2[:2]] == runs  # kept, not re-run
    assert all(json.loads(x)["stage"] == 2 for x in runs2[2:])  # only a new top 2 gets a new stage

    # a budget larger than the space (every point measured or set aside, then measured points re-measured) is the
    # proposer's: tests/study/test_searcher.py covers it without a third driver run here
    assert time.monotonic() - t0 < 600
