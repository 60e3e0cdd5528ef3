"""Serve a real-weight model with and without speculation, compare greedy outputs token for token, read accept lengths.

    python3 tools/device/real_smoke.py --model-dir /tmp/models/smollm2-135m --prompts prompts.jsonl --out DIR \
        --scenario base= --scenario "ngram=--speculative-algorithm NGRAM" [--common "..."] [--levels 1,16] \
        [--deadline 500] [--engine sim]

The first scenario is the reference (no speculation). For each scenario, one server: launch (its own process group),
wait for ``/health``, then at each concurrency level in ``--levels``: ``/flush_cache``, every prompt of ``--prompts``
once as a greedy ``/generate`` (temperature 0, ``max_new_tokens`` from the row), then ``/server_info``. Per level it
records output tok/s, the accept length from the requests' ``meta_info`` (completion tokens / ``spec_verify_ct``,
summed over the level) and ``internal_states[0].avg_spec_accept_length`` from ``/server_info``. SGLang's figure is a
running average since its counters were last zeroed, and an empty ``POST /set_internal_state`` zeroes them (0.5.17,
``Scheduler.set_internal_state``), so each level starts with one and its reading covers that level alone
(``server_info_counters_reset`` says whether the server confirmed). The process group is killed at the end.

Output equality: each scenario's output token ids at concurrency 1 (the first level) are compared with the
reference's at the same level, prompt by prompt: identical prompts, and for each differing prompt the first differing
position. Writes ``smoke.json``, ``smoke.md``, ``outputs-<scenario>.jsonl`` and ``server-<scenario>.log`` to ``--out``.
``--help-out FILE`` saves ``python -m sglang.launch_server --help`` first. ``--engine sim`` runs autotune's simulated
server instead (CPU rehearsal; its outputs are synthetic and identical by construction).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx


def load_prompts(path: str) -> list[dict]:
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows or not all("prompt" in r for r in rows):
        raise SystemExit(f"real_smoke: {path} must hold JSON rows with a 'prompt' (tools/device/sharegpt_prompts.py)")
    return rows


def server_argv(engine: str, model_dir: str, port: int, common: str, flags: str) -> list[str]:
    if engine == "sim":
        head = [sys.executable, "-m", "autotune.sim", "--sim-launch-speedup", "50", "--sim-time-scale", "50"]
    else:
        head = [sys.executable, "-m", "sglang.launch_server"]
    return [
        *head,
        "--model-path",
        model_dir,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *shlex.split(common),
        *shlex.split(flags),
    ]


# The lent GPU machines' rule: every process there runs with NVLink multicast off (tools/device/bootstrap.sh exports it).
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def wait_ready(url: str, proc: subprocess.Popen, timeout_s: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before /health answered")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return time.monotonic() - t0
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"no /health 200 within {timeout_s:.0f} s")


def server_info(client: httpx.Client, url: str) -> dict:
    for path in ("/server_info", "/get_server_info"):
        r = client.get(url + path, timeout=30)
        if r.status_code == 200:
            return r.json()
    return {}


def avg_accept(info: dict) -> float | None:
    states = info.get("internal_states") or [{}]
    value = states[0].get("avg_spec_accept_length") if states else None
    return float(value) if value is not None else None


def generate(client: httpx.Client, url: str, row: dict) -> dict:
    body = {
        "text": row["prompt"],
        "sampling_params": {"temperature": 0.0, "max_new_tokens": int(row.get("max_new_tokens", 128))},
    }
    t0 = time.monotonic()
    r = client.post(url + "/generate", json=body, timeout=300)
    r.raise_for_status()
    data = r.json()
    meta = data.get("meta_info") or {}
    return {
        "text": data.get("text", ""),
        "output_ids": data.get("output_ids"),
        "completion_tokens": int(meta.get("completion_tokens") or 0),
        "spec_verify_ct": meta.get("spec_verify_ct"),
        "e2e_s": time.monotonic() - t0,
        "finish_reason": (meta.get("finish_reason") or {}).get("type"),
    }


def set_internal_state_updated(body: object) -> bool:
    """Whether a ``/set_internal_state`` answer says every scheduler applied the update: SGLang 0.5.17 answers a list
    with one bool per scheduler (``[true]``, seen on the H200); ``{"updated": true}`` items are taken as well."""
    items = body if isinstance(body, list) else [body]
    return bool(items) and all(b is True or (isinstance(b, dict) and b.get("updated") is True) for b in items)


def reset_spec_counters(client: httpx.Client, url: str) -> bool:
    """``POST /set_internal_state {"server_args": {}}``: SGLang (0.5.17) zeroes the counters behind
    ``avg_spec_accept_length`` when an update succeeds, and an empty update succeeds. True when it said so."""
    try:
        r = client.post(url + "/set_internal_state", json={"server_args": {}}, timeout=30)
        body = r.json() if r.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return False
    return set_internal_state_updated(body)


def run_level(client: httpx.Client, url: str, rows: list[dict], concurrency: int) -> tuple[list[dict], dict]:
    client.post(url + "/flush_cache", timeout=30)
    reset = reset_spec_counters(client, url)
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        outs = list(pool.map(lambda r: generate(client, url, r), rows))
    wall = time.monotonic() - t0
    tokens = sum(o["completion_tokens"] for o in outs)
    verify = sum(int(o["spec_verify_ct"] or 0) for o in outs)
    info = server_info(client, url)
    return outs, {
        "concurrency": concurrency,
        "requests": len(outs),
        "output_tokens": tokens,
        "wall_s": round(wall, 3),
        "output_tok_per_s": round(tokens / wall, 1) if wall > 0 else None,
        "accept_length_meta": round(tokens / verify, 4) if verify else None,
        "accept_length_server_info": avg_accept(info),
        "server_info_counters_reset": reset,  # True: the /server_info reading covers this level alone
        "accept_source": "measured",
    }


def compare(ref: list[dict], other: list[dict]) -> dict:
    """Token-for-token comparison of two runs over the same prompts (output ids; text when ids are absent)."""
    same, diffs = 0, []
    for i, (a, b) in enumerate(zip(ref, other, strict=True)):
        x = a["output_ids"] if a["output_ids"] is not None else a["text"]
        y = b["output_ids"] if b["output_ids"] is not None else b["text"]
        if x == y:
            same += 1
            continue
        first = next((k for k, (u, v) in enumerate(zip(x, y, strict=False)) if u != v), min(len(x), len(y)))
        diffs.append({"prompt": i, "first_diff_at": first, "len_ref": len(x), "len_other": len(y)})
    return {
        "prompts": len(ref),
        "identical": same,
        "differing": diffs,
        "compared": "output_ids" if ref and ref[0]["output_ids"] is not None else "text",
    }


def run_scenario(
    args: argparse.Namespace, name: str, flags: str, rows: list[dict], port: int, out: Path, deadline: float
) -> dict:
    argv = server_argv(args.engine, args.model_dir, port, args.common, flags)
    log = (out / f"server-{name}.log").open("w")
    rec: dict = {"scenario": name, "flags": flags, "argv": argv}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        rec["launch_to_health_s"] = round(
            wait_ready(url, proc, min(args.ready_timeout, deadline - time.monotonic())), 1
        )
        with httpx.Client() as client:
            info = server_info(client, url)
            rec["server_args"] = {
                k: info.get(k)
                for k in (
                    "version",
                    "speculative_algorithm",
                    "speculative_num_draft_tokens",
                    "speculative_eagle_topk",
                    "speculative_num_steps",
                    "speculative_ngram_max_bfs_breadth",
                    "speculative_ngram_match_type",
                    "speculative_ngram_max_trie_depth",
                    "max_running_requests",
                    "cuda_graph_max_bs",
                    "cuda_graph_max_bs_decode",
                )
            }
            rec["levels"], rec["outputs"] = [], {}
            for c in args.levels:
                if time.monotonic() > deadline:
                    rec["skipped_levels"] = "deadline"
                    break
                outs, level = run_level(client, url, rows, c)
                rec["levels"].append(level)
                rec["outputs"][c] = outs
                print(f"[smoke] {name} C={c}: {level}", flush=True)
        rec["ok"] = True
    except Exception as exc:  # noqa: BLE001  (a failed scenario is data; the others still run)
        rec["ok"], rec["error"] = False, f"{type(exc).__name__}: {exc}"
        print(f"[smoke] {name} FAILED: {rec['error']}", flush=True)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        log.close()
    rec["scenario_s"] = round(time.monotonic() - t0, 1)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-dir", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--scenario", action="append", required=True, help="NAME=FLAGS; the first is the reference")
    ap.add_argument("--common", default="", help="flags every server gets")
    ap.add_argument("--levels", default="1,16", help="concurrency levels; the first is used for the equality check")
    ap.add_argument("--engine", choices=("sglang", "sim"), default="sglang")
    ap.add_argument("--port", type=int, default=31000)
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--deadline", type=float, default=540, help="seconds from start; later scenarios are skipped")
    ap.add_argument(
        "--chat-template",
        action="store_true",
        help="send each prompt through the model directory's chat template (raw prompts in --prompts)",
    )
    ap.add_argument("--help-out", help="save `python -m sglang.launch_server --help` here first")
    args = ap.parse_args(argv)
    missing = [k for k, v in MULTICAST_OFF.items() if os.environ.get(k) != v]
    if args.engine == "sglang" and missing:
        print(
            f"error: {', '.join(missing)} not set as the lent machines require (NVLink multicast off); "
            "source tools/device/bootstrap.sh first",
            file=sys.stderr,
        )
        return 2
    args.levels = [int(x) for x in args.levels.split(",")]
    start = time.monotonic()
    deadline = start + args.deadline
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = load_prompts(args.prompts)
    if args.chat_template:
        from transformers import AutoTokenizer  # noqa: PLC0415

        tok = AutoTokenizer.from_pretrained(args.model_dir)
        rows = [
            {
                **r,
                "prompt": tok.apply_chat_template(
                    [{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True
                ),
            }
            for r in rows
        ]
    if args.help_out and args.engine == "sglang":
        h = subprocess.run([sys.executable, "-m", "sglang.launch_server", "--help"], capture_output=True, text=True)
        Path(args.help_out).write_text(h.stdout + h.stderr)
    scenarios = [s.split("=", 1) if "=" in s else (s, "") for s in args.scenario]
    results = []
    for k, (name, flags) in enumerate(scenarios):
        if time.monotonic() > deadline - 30:
            results.append({"scenario": name, "flags": flags, "ok": False, "error": "skipped: deadline"})
            continue
        results.append(run_scenario(args, name, flags, rows, args.port + k, out, deadline))
    c0 = args.levels[0]
    ref_outs = results[0].get("outputs", {}).get(c0)
    for k, rec in enumerate(results):
        outs = rec.pop("outputs", {}).get(c0)
        if outs is None:
            continue
        with (out / f"outputs-{rec['scenario']}.jsonl").open("w") as f:
            for row in outs:
                f.write(json.dumps(row) + "\n")
        if k > 0 and ref_outs is not None:
            rec["equality_vs_reference"] = compare(ref_outs, outs)
    summary = {
        "engine": args.engine,
        "model_dir": args.model_dir,
        "prompts": args.prompts,
        "n_prompts": len(rows),
        "levels": args.levels,
        "common": args.common,
        "scenarios": results,
        "total_s": round(time.monotonic() - start, 1),
    }
    (out / "smoke.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "smoke.md").write_text(render(summary))
    print(render(summary))
    return 0 if all(r.get("ok") for r in results) else 1


def render(s: dict) -> str:
    lines = [
        f"# Real-weight speculation smoke ({s['engine']})",
        "",
        f"{s['n_prompts']} prompts from {s['prompts']}, levels {s['levels']}; common flags `{s['common']}`.",
        "",
        "| scenario | flags | launch s | C | out tok/s | accept (meta_info) | accept (/server_info, this level) "
        "| identical to reference at C=1 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in s["scenarios"]:
        eq = r.get("equality_vs_reference")
        eq_s = (
            "reference"
            if r is s["scenarios"][0]
            else (f"{eq['identical']}/{eq['prompts']} ({eq['compared']})" if eq else "-")
        )
        if not r.get("ok") and not r.get("levels"):
            lines.append(f"| {r['scenario']} | `{r['flags']}` | - | - | - | - | - | FAILED: {r.get('error')} |")
            continue
        for lv in r.get("levels", []):
            lines.append(
                f"| {r['scenario']} | `{r['flags']}` | {r.get('launch_to_health_s')} | {lv['concurrency']} "
                f"| {lv['output_tok_per_s']} | {lv['accept_length_meta']} | {lv['accept_length_server_info']} "
                f"| {eq_s} |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
