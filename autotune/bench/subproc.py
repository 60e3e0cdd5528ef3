"""The benchmark client as a process of its own: ``python -m autotune.bench.subproc --url URL --plan PLAN --out OUT``.

A study's replica runs the client this way rather than inside its own event loop, so the client does not share a Python
interpreter, an event loop or a GIL with Ray Serve's replica machinery (health checks, metrics pushes, the HTTP proxy
path), and gets an environment cleaned of what Ray sets for its workers (``OMP_NUM_THREADS`` and the other thread caps).
Where the slot has a CPU set (``autotune.core.cpusets``), the client process is pinned to it, like its server.

The child writes ``{"ok": true, "result": BenchResult}`` or ``{"ok": false, "message": ...}`` to ``--out`` and prints
``level K M C`` on stdout as level K of M (concurrency C) begins, which the parent relays as progress.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from autotune.bench.plan_codec import plan_from_json, plan_to_json
from autotune.bench.types import BenchPlan, BenchResult
from autotune.core.errors import BenchError

# Thread caps Ray sets in its workers (to the actor's CPU count, often 1) that a benchmark client must not inherit.
THREAD_CAPS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "TORCH_NUM_THREADS",
)
LevelCallback = Callable[[int, int, int], None]


def clean_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without Ray's per-worker thread caps."""
    env = dict(os.environ if base is None else base)
    for name in THREAD_CAPS:
        env.pop(name, None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _set_affinity(pid: int, cpus: Sequence[int] | None) -> str:
    """Pin ``pid`` to ``cpus``; returns "" or why it could not (the run goes on unpinned)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        return ""
    try:
        os.sched_setaffinity(pid, set(cpus))
    except OSError as exc:
        return f"client CPU affinity not applied ({exc})"
    return ""


async def arun_plan_in_subprocess(
    base_url: str,
    plan: BenchPlan,
    *,
    cpus: Sequence[int] | None = None,
    on_level: LevelCallback | None = None,
    timeout_s: float | None = None,
    python: str = sys.executable,
) -> BenchResult:
    """Run ``plan`` against ``base_url`` in a child process; raises ``BenchError`` as ``arun_plan`` would."""
    with tempfile.TemporaryDirectory(prefix="autotune-bench-") as tmp:
        plan_path, out_path = Path(tmp) / "plan.json", Path(tmp) / "result.json"
        plan_path.write_text(plan_to_json(plan))
        proc = await asyncio.create_subprocess_exec(
            python,
            "-m",
            "autotune.bench.subproc",
            "--url",
            base_url,
            "--plan",
            str(plan_path),
            "--out",
            str(out_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL,
            env=clean_env(),
        )
        note = _set_affinity(proc.pid, cpus)
        try:
            stderr = await asyncio.wait_for(_pump(proc, on_level), timeout_s)
        except asyncio.TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise BenchError(f"the benchmark client process ran past {timeout_s:g} s and was killed") from exc
        except BaseException:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
            raise
        try:
            data = json.loads(out_path.read_text())
        except (OSError, ValueError) as exc:
            tail = stderr.decode("utf-8", "replace").strip()[-1500:]
            raise BenchError(
                f"the benchmark client process exited with code {proc.returncode} and no result "
                f"({type(exc).__name__}); its stderr: {tail}"
            ) from exc
    if not data.get("ok"):
        raise BenchError(str(data.get("message", "the benchmark client process failed")))
    result = BenchResult.from_json(data["result"])
    if note:
        result = replace(result, notes=(*result.notes, note))
    return result


async def _pump(proc: asyncio.subprocess.Process, on_level: LevelCallback | None) -> bytes:
    """Relay the child's ``level K M C`` lines until it exits; returns its stderr."""
    assert proc.stdout is not None and proc.stderr is not None
    err_task = asyncio.create_task(proc.stderr.read())
    async for raw in proc.stdout:
        parts = raw.decode("utf-8", "replace").split()
        if on_level is not None and len(parts) == 4 and parts[0] == "level":
            try:
                key = parts[3]  # a concurrency, or an open-loop level's key ("rate8")
                on_level(int(parts[1]), int(parts[2]), int(key) if key.isdigit() else key)  # type: ignore[arg-type]  # an open-loop level's key is a str ("rate8"), which LevelCallback's int does not say yet
            except ValueError:
                pass
            except Exception:  # noqa: BLE001, S110 - progress is not worth a benchmark
                pass
    await proc.wait()
    return await err_task


def main(argv: list[str] | None = None) -> int:
    from autotune.bench.client import run_plan

    p = argparse.ArgumentParser(prog="python -m autotune.bench.subproc", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", required=True)
    p.add_argument("--plan", required=True, help="a BenchPlan as JSON (autotune.bench.plan_codec)")
    p.add_argument("--out", required=True, help="where to write the result JSON")
    args = p.parse_args(argv)

    def level(k: int, m: int, c: int | str) -> None:
        print(f"level {k} {m} {c}", flush=True)

    try:
        plan = plan_from_json(Path(args.plan).read_text())
        result = run_plan(args.url, plan, on_level=level)
        data: dict[str, object] = {"ok": True, "result": result.to_json()}
    except (BenchError, OSError, ValueError, TypeError, KeyError) as exc:
        data = {"ok": False, "message": f"{exc}" if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"}
    Path(args.out).write_text(json.dumps(data))
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
