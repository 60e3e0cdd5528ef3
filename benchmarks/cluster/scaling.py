"""How a simulated study's time falls with its GPU slots on a multi-node Ray cluster (one machine, several nodes).

Starts a Ray cluster on this machine (``ray.cluster_utils.Cluster``: a head with no GPU and ``--workers`` nodes that
declare one GPU each), then runs the same simulated study (same seed, so the same trials) once per slot count ``k``
(``--max-concurrent k``, the slots spread over the workers), the driver joining with ``--address``; ``--repeats``
times, each repeat running every ``k`` in turn, so a speed-up is a ratio within one repeat.

Times are on the simulator's own clock, not the host's (a 2-core host running four servers at once would otherwise
decide them). A trial costs its simulated launch (``phases.weights_loaded_s``, the offset of the weights' end in the
simulated log, plus ``phases.graph_capture_s``) and its benchmark's simulated seconds (the levels' ``duration_s``). Two
study times are given for each run:

- ``as_run``: the trials on each slot as the driver placed them (``engine.serve_app``), a slot's time the sum of its
  trials', the study's its busiest slot's. Which slot takes the next trial is decided on the host's clock (the first
  slot free), so on a loaded host it carries the host's overheads into the split.
- ``sim_clock``: the same trials, in the order the driver started them, each on the slot that is free first on the
  simulator's clock: the split the driver's first-free-slot rule makes where a trial's own time dominates the host's
  per-trial overhead, as on GPUs (minutes per launch against about a second of Ray and sampler work).

Speed-up is ``T(1) / T(k)`` of the same repeat (ideal: ``k``); efficiency is the study's work over ``k x T(k)``.

    flock /tmp/autotune-ray.lock nice -n 10 python -m benchmarks.cluster.scaling --slots 1 2 4 --trials 8 \\
        --repeats 3 --out results/evidence/sim-cluster-scaling
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPACE: dict[str, Any] = {
    "study": {
        "name": "scaling",
        "engine": "sim",
        "trials": 8,
        "seed": 3,
        "objectives": [{"metric": "output_tok_per_s", "level": "max", "direction": "maximize"}],
        "constraints": [{"metric": "ttft_ms.p99", "level": "max", "max": 60000}],
        "finalists": {"count": 0},
    },
    "server": {"model_path": "dummy-llama-1b", "tp_size": 1},
    "sim": {"profile": "h200-llama-1b", "time_scale": 20},
    "workload": {"kind": "synthetic", "input_len": 64, "output_len": 32},
    "load_levels": [1, 8],
    "bench": {"rounds": 1, "warmup_requests": 1, "min_requests": 8, "max_windows": 2},
    "params": {
        "cuda_graph_max_bs": {"flag": "cuda-graph-max-bs-decode", "type": "categorical", "choices": [8, 16, 32, 64]},
        "mem_fraction_static": {"flag": "mem-fraction-static", "type": "categorical", "choices": [0.7, 0.8, 0.85]},
    },
    "points_to_evaluate": [],
}


def trial_sim_s(record: dict[str, Any]) -> float:
    """A trial's cost on the simulator's clock: simulated launch + simulated benchmark seconds."""
    ph = record.get("phases") or {}
    launch = (ph.get("weights_loaded_s") or 0.0) + (ph.get("graph_capture_s") or 0.0)
    levels = (record.get("bench") or {}).get("levels") or []
    return float(launch + sum(level.get("duration_s") or 0.0 for level in levels))


def as_run(records: list[dict[str, Any]]) -> dict[str, float]:
    """Simulated seconds per slot, the trials on each slot as the driver placed them."""
    per_slot: dict[str, float] = {}
    for r in records:
        slot = (r.get("engine") or {}).get("serve_app") or "?"
        per_slot[slot] = per_slot.get(slot, 0.0) + trial_sim_s(r)
    return per_slot


def sim_clock(records: list[dict[str, Any]], slots: int) -> list[float]:
    """Simulated seconds per slot when each trial, in the order the driver started them, goes to the slot that is
    free first on the simulator's clock (list scheduling)."""
    free = [0.0] * slots
    for r in sorted(records, key=lambda r: (r.get("started_at") or "", r["number"])):
        k = free.index(min(free))
        free[k] += trial_sim_s(r)
    return free


def start_spread(records: list[dict[str, Any]], k: int) -> float:
    """Host seconds between the first and the k-th trial's start (the records' ``started_at``, 1 s resolution)."""
    import datetime as dt

    starts = sorted(dt.datetime.fromisoformat(r["started_at"]) for r in records if r.get("started_at"))[:k]
    return (starts[-1] - starts[0]).total_seconds() if len(starts) > 1 else 0.0


def run_study(k: int, trials: int, time_scale: float, work: Path, address: str, port: int, tag: str) -> dict:
    space = json.loads(json.dumps(SPACE))
    space["study"].update(name=f"scaling-k{k}", trials=trials)
    space["sim"]["time_scale"] = time_scale
    path = work / f"scaling-k{k}.yaml"
    path.write_text(yaml.safe_dump(space))
    cmd = [sys.executable, "-m", "autotune.search", "--space", str(path), "--finalists", "0", "--fresh"]
    cmd += ["--results-dir", str(work / "results"), "--address", address, "--max-concurrent", str(k)]
    cmd += ["--serve-port", str(port)]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    (work / f"{tag}.console.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"scaling-k{k} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    lines = (work / "results" / f"scaling-k{k}" / "trials.jsonl").read_text().splitlines()
    (work / f"{tag}.trials.jsonl").write_text("\n".join(lines) + "\n")  # the records the figures come from
    records = [json.loads(x) for x in lines]
    placed = as_run(records)
    listed = sim_clock(records, k)
    return {
        "slots": k,
        "trials": len(records),
        "host_wall_s": round(wall, 1),
        "work_sim_s": sum(trial_sim_s(r) for r in records),
        "as_run_sim_s": max(placed.values(), default=0.0),
        "as_run_per_slot": placed,
        "as_run_trials_per_slot": {
            s: sum(1 for r in records if (r.get("engine") or {}).get("serve_app") == s) for s in placed
        },
        "sim_clock_s": max(listed, default=0.0),
        "sim_clock_per_slot": listed,
        # the host's side, for the diagnosis: a trial's host seconds (launch + benchmark, as the runner timed them) and
        # how far apart (host seconds, 1 s resolution) the first k trials started
        "host_trial_s": statistics.mean(float((r.get("phases") or {}).get("trial_wall_s") or 0.0) for r in records),
        "start_spread_s": start_spread(records, k),
    }


def table(rows: list[dict]) -> str:
    """Mean and range over the repeats of each slot count; speed-ups are ratios within a repeat."""
    lines = [
        "| slots | runs | study time as run, sim s | speed-up as run (min-max) | / ideal | "
        "study time on the sim clock, sim s | speed-up on the sim clock (min-max) | / ideal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in sorted({r["slots"] for r in rows}):
        mine = [r for r in rows if r["slots"] == k]
        a = [r["speedup_as_run"] for r in mine]
        b = [r["speedup_sim_clock"] for r in mine]
        lines.append(
            f"| {k} | {len(mine)} | {statistics.mean(r['as_run_sim_s'] for r in mine):.1f} | "
            f"{statistics.mean(a):.2f} ({min(a):.2f}-{max(a):.2f}) | {statistics.mean(a) / k:.2f} | "
            f"{statistics.mean(r['sim_clock_s'] for r in mine):.1f} | "
            f"{statistics.mean(b):.2f} ({min(b):.2f}-{max(b):.2f}) | {statistics.mean(b) / k:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=4, help="worker nodes, one simulated GPU each")
    p.add_argument("--time-scale", type=float, default=20.0)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    if args.slots[0] != 1:
        p.error("--slots must start with 1 (the speed-up is against one slot)")
    from ray.cluster_utils import Cluster

    sys.path.insert(0, str(ROOT))
    from tests.conftest import free_port

    out = args.out.resolve()
    work = out / "runs"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["AUTOTUNE_SERVER_REGISTRY"] = str(work / "registry")
    os.environ["AUTOTUNE_LOG_DIR"] = str(work / "server-logs")
    head = {"num_cpus": 2, "num_gpus": 0, "include_dashboard": False, "node_ip_address": "127.0.0.1"}
    c = Cluster(initialize_head=True, head_node_args=head)
    rows: list[dict] = []
    try:
        for _ in range(args.workers):
            c.add_node(num_cpus=1, num_gpus=1, node_ip_address="127.0.0.1")
        c.wait_for_nodes()
        address = "127.0.0.1:" + c.address.rsplit(":", 1)[1]
        for rep in range(args.repeats):
            base: dict | None = None
            for k in args.slots:
                row = run_study(k, args.trials, args.time_scale, work, address, free_port(), f"r{rep}-k{k}")
                base = base or row
                row["repeat"] = rep
                row["speedup_as_run"] = base["as_run_sim_s"] / row["as_run_sim_s"]
                row["speedup_sim_clock"] = base["sim_clock_s"] / row["sim_clock_s"]
                rows.append(row)
                print(json.dumps({k2: v for k2, v in row.items() if "per_slot" not in k2}), flush=True)
    finally:
        c.shutdown()
        import shutil

        for bulky in ("results", "server-logs", "registry"):  # the per-run consoles and records stay
            shutil.rmtree(work / bulky, ignore_errors=True)
    text = table(rows)
    print(text)
    (out / "scaling.json").write_text(json.dumps(rows, indent=2) + "\n")
    (out / "table.md").write_text(text + "\n")
    import ray

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    provenance = {
        "study": "sim-cluster-scaling",
        "engine": "sim",
        "simulated": True,
        "profile": SPACE["sim"]["profile"],
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "commit": commit,
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "ray": ray.__version__,
        "cluster": f"ray.cluster_utils.Cluster on one machine: head 0 GPUs, {args.workers} workers x 1 simulated GPU",
        "command": "flock /tmp/autotune-ray.lock nice -n 10 python -m benchmarks.cluster.scaling "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "clock": "the simulator's own (virtual) clock: launch phases from the simulated log, benchmark windows' "
        "simulated durations; host wall seconds are listed only for reference",
    }
    (out / "provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
