"""Interference between two servers that share a node, with and without disjoint CPU sets (issue #10, item 4).

    python tools/device/interference.py --model-dir /tmp/models/llama-1b --out DIR [--rounds 2] [--deadline-s 420]

Two SGLang servers of the same small model share one node (one GPU where only one is lent: ``--gpus 0,0``; one GPU each
with ``--gpus 0,1``). The node's CPUs are cut in two with autotune's own plan (``autotune.core.cpusets.partition``, NUMA
order), exactly as a 2-slot study does. Each server is launched pinned to its half; its benchmark client
(``python -m autotune.bench.client``, the study's client) runs pinned to the same half. Then, per level of the plan:

- ``alone``: one server benchmarked while the other is idle (each server in turn): the reference;
- ``isolated``: both benchmarked at once, each server and client on its own half (``study.cpu_isolation: auto``);
- ``shared``: both benchmarked at once after every thread of both servers is re-pinned to all CPUs and the clients run
  unpinned (``study.cpu_isolation: off``, what a 2-slot study did before CPU sets).

``isolated`` and ``shared`` alternate for ``--rounds`` rounds. The two clients start together and run the same plan,
so their levels overlap in time (not to the second). On one GPU the pair also shares the GPU: the difference between
``isolated`` and ``shared`` is what the CPU sets change; the difference between ``alone`` and ``isolated`` is what
remains (the shared GPU, memory bandwidth, the PCIe link).

Writes ``interference.json`` (every client result, the CPU sets, the commands) and ``interference.md`` (a table per
level: output tok/s mean and 95% interval of each run, and the ratios to ``alone``) to ``--out``; server logs beside.
``--engine sim`` runs the same protocol against the simulated server (a CPU rehearsal; its figures are not GPU ones).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402

from autotune.core import cpusets  # noqa: E402
from autotune.core.site import server_environment  # noqa: E402
from autotune.verify.compare import level_interval, level_value  # noqa: E402

PORTS = (30100, 30101)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--engine", choices=["sglang", "sim"], default="sglang")
    p.add_argument("--gpus", default="0,0", help="CUDA_VISIBLE_DEVICES of server A and server B (default: both on 0)")
    p.add_argument(
        "--mem-fractions",
        default="0.30,0.45",
        help="--mem-fraction-static of A and B; B starts after A holds its memory (SGLang sizes the "
        "fraction against what the GPU has at its start)",
    )
    p.add_argument("--max-total-tokens", type=int, default=65536, help="the same KV pool for both servers")
    p.add_argument("--concurrency", default="1,16,64")
    p.add_argument(
        "--client-args",
        default="--input-len 256 --output-len 128 --range-ratio 0.5 --vocab-size 128000 "
        "--windows 3,3 --min-duration 2.5 --warmup 4",
    )
    p.add_argument("--rounds", type=int, default=2, help="isolated/shared pairs, alternating")
    p.add_argument("--ready-timeout-s", type=float, default=300.0)
    p.add_argument("--deadline-s", type=float, default=420.0, help="skip a phase that would end after this")
    return p


def server_cmd(args: argparse.Namespace, port: int, mem: str) -> list[str]:
    module = "sglang.launch_server" if args.engine == "sglang" else "autotune.sim.server"
    cmd = [
        sys.executable,
        "-m",
        module,
        "--model-path",
        args.model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--tp-size",
        "1",
        "--mem-fraction-static",
        mem,
        "--max-total-tokens",
        str(args.max_total_tokens),
        "--cuda-graph-max-bs-decode",
        "64",
    ]
    if args.engine == "sglang":
        cmd += ["--load-format", "dummy", "--attention-backend", "triton", "--sampling-backend", "pytorch"]
    else:
        cmd += ["--sim-profile", "h200x2-llama-8b", "--sim-time-scale", "5"]
    return cmd


def pin(cpus: tuple[int, ...] | None, cmd: list[str]) -> list[str]:
    return cmd if not cpus else ["taskset", "-c", cpusets.format_cpulist(cpus), *cmd]


def tree_tids(pid: int) -> list[int]:
    """Every thread of ``pid`` and of its descendants (read from /proc)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    todo, pids = [pid], []
    while todo:
        p = todo.pop()
        pids.append(p)
        todo.extend(children.get(p, []))
    tids = []
    for p in pids:
        try:
            tids.extend(int(t.name) for t in Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
    return tids


def repin(pid: int, cpus: tuple[int, ...]) -> int:
    """Pin every thread of the server's process tree to ``cpus``; returns how many threads were pinned."""
    n = 0
    for tid in tree_tids(pid):
        try:
            os.sched_setaffinity(tid, set(cpus))
            n += 1
        except OSError:
            continue
    return n


def wait_ready(port: int, proc: subprocess.Popen, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode} before it was ready (see its log)")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"server on port {port} not ready after {timeout:.0f} s")


def run_clients(args: argparse.Namespace, ports: list[int], cpus: list[tuple[int, ...] | None]) -> list[Any]:
    """One client per port, started together; returns each one's parsed JSON result (first repeat)."""
    procs = []
    for port, c in zip(ports, cpus, strict=True):
        cmd = [
            sys.executable,
            "-m",
            "autotune.bench.client",
            "--url",
            f"http://127.0.0.1:{port}",
            "--concurrency",
            args.concurrency,
            *args.client_args.split(),
            "--json",
        ]
        procs.append(subprocess.Popen(pin(c, cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    done = [p.communicate() for p in procs]  # every client finishes (or fails) before any result is read
    for p, (_, stderr) in zip(procs, done, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"client failed ({p.returncode}): {stderr[-2000:]}")
    return [json.loads(stdout)[0] for stdout, _ in done]


def level_figures(result: dict[str, Any]) -> dict[int, dict[str, float | None]]:
    """Per level of one client result: output tok/s (the mean of its windows) and its 95% interval over the windows."""
    figs = {}
    for lv in result["levels"]:
        low, high, n = level_interval(lv, "output_tok_per_s")
        figs[int(lv["concurrency"])] = {"mean": level_value(lv, "output_tok_per_s"), "low": low, "high": high, "n": n}
    return figs


def render(doc: dict[str, Any]) -> str:
    runs = doc["runs"]
    alone = {r["servers"][0]: level_figures(r["results"][0]) for r in runs if r["phase"] == "alone"}
    lines = [
        f"# Interference of two servers on one node ({doc['engine']}, {doc['model_dir']}, GPUs {doc['gpus']})",
        "",
        f"CPUs: A {doc['cpus'][0]}, B {doc['cpus'][1]} (autotune.core.cpusets.partition of {doc['all_cpus']}).",
        "Output tok/s per server, mean over the level's windows [95% interval]; ratio to the same server alone.",
        "",
        "| run | server | " + " | ".join(f"c={c}" for c in doc["levels"]) + " |",
        "|---|---|" + "---|" * len(doc["levels"]),
    ]
    for r in runs:
        for s, res in zip(r["servers"], r["results"], strict=True):
            figs = level_figures(res)
            cells = []
            for c in doc["levels"]:
                f = figs[c]
                iv = f"[{f['low']:,.0f} .. {f['high']:,.0f}]" if f["low"] is not None else ""
                ratio = ""
                if r["phase"] != "alone" and s in alone:
                    ratio = f" ({f['mean'] / alone[s][c]['mean']:.2f}x)"
                cells.append(f"{f['mean']:,.0f} {iv}{ratio}")
            lines.append(f"| {r['phase']} {r['round'] or ''} | {'AB'[s]} | " + " | ".join(cells) + " |")
    lines += ["", "Per phase, the mean ratio to alone over both servers and rounds:", ""]
    for phase in ("isolated", "shared"):
        rows = [r for r in runs if r["phase"] == phase]
        if not rows:
            continue
        cells = []
        for c in doc["levels"]:
            rs = [
                level_figures(res)[c]["mean"] / alone[s][c]["mean"]
                for r in rows
                for s, res in zip(r["servers"], r["results"], strict=True)
                if s in alone
            ]
            cells.append(f"c={c}: {sum(rs) / len(rs):.3f}x (min {min(rs):.3f}, max {max(rs):.3f}, n {len(rs)})")
        lines.append(f"- {phase}: " + "; ".join(cells))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    t_start = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    everything = tuple(sorted(os.sched_getaffinity(0)))
    numa = cpusets.numa_cpus()
    halves = cpusets.partition(everything, 2, numa)
    gpus = args.gpus.split(",")
    mems = args.mem_fractions.split(",")
    doc: dict[str, Any] = {
        "engine": args.engine,
        "model_dir": args.model_dir,
        "gpus": args.gpus,
        "all_cpus": cpusets.format_cpulist(everything),
        "numa_nodes": len(numa),
        "cpus": [cpusets.format_cpulist(h) for h in halves],
        "levels": [int(c) for c in args.concurrency.split(",")],
        "client_args": args.client_args,
        "servers": [],
        "runs": [],
    }
    procs: list[subprocess.Popen] = []

    def save() -> None:
        (args.out / "interference.json").write_text(json.dumps(doc, indent=1))
        if any(r["phase"] == "alone" for r in doc["runs"]):
            (args.out / "interference.md").write_text(render(doc))

    try:
        for k in range(2):
            env = server_environment(os.environ, env={"CUDA_VISIBLE_DEVICES": gpus[k]})  # the site's variables kept
            cmd = pin(halves[k], server_cmd(args, PORTS[k], mems[k]))
            log = open(args.out / f"server-{'ab'[k]}.log", "w")  # noqa: SIM115 - open for the server's lifetime
            procs.append(subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            ready = wait_ready(PORTS[k], procs[k], args.ready_timeout_s)
            doc["servers"].append({"cmd": cmd, "gpu": gpus[k], "ready_s": round(ready, 1)})
            print(f"server {'AB'[k]} ready in {ready:.0f} s on CPUs {cpusets.format_cpulist(halves[k])}", flush=True)
        phases: list[tuple[str, int | None, list[int]]] = [("alone", None, [0]), ("alone", None, [1])]
        for r in range(1, args.rounds + 1):
            phases += [("isolated", r, [0, 1]), ("shared", r, [0, 1])]
        longest = 0.0
        for phase, rnd, servers in phases:
            elapsed = time.monotonic() - t_start
            if elapsed + 1.2 * longest > args.deadline_s:
                print(f"skip {phase} {rnd}: {elapsed:.0f} s gone, a phase takes about {longest:.0f} s", flush=True)
                doc.setdefault("skipped", []).append(f"{phase} {rnd}")
                continue
            cpus = [halves[s] for s in servers] if phase != "shared" else [None] * len(servers)
            for s in range(2):
                doc.setdefault("threads_pinned", []).append(
                    {
                        "phase": phase,
                        "round": rnd,
                        "server": s,
                        "threads": repin(procs[s].pid, everything if phase == "shared" else halves[s]),
                    }
                )
            t0 = time.monotonic()
            results = run_clients(args, [PORTS[s] for s in servers], cpus)
            took = time.monotonic() - t0
            longest = max(longest, took)
            doc["runs"].append(
                {"phase": phase, "round": rnd, "servers": servers, "seconds": round(took, 1), "results": results}
            )
            print(
                f"{phase} {rnd or ''} servers {servers}: {took:.0f} s: "
                + "; ".join(
                    f"c={c} " + "/".join(f"{level_figures(res)[c]['mean']:,.0f}" for res in results)
                    for c in doc["levels"]
                ),
                flush=True,
            )
            save()
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        doc["seconds"] = round(time.monotonic() - t_start, 1)
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
