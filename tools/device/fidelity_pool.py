"""Pool the runs of several fidelity checks (one server configuration and workload, separate launches) and compare.

    python tools/device/fidelity_pool.py CHECK_DIR [CHECK_DIR ...] [--out pooled.md] [--tolerance 0.03]

Each ``CHECK_DIR`` is a ``fidelity.py --out`` folder; its ``runs.jsonl`` (written run by run, so a check cut off by a
deadline still counts) is read. Two comparisons of autotune against bench_serving, over all runs:

- **pooled (Welch)**: the criterion ``fidelity.py`` uses, the means of all runs of each client, with a 95% interval of
  the relative difference from the run-to-run variance of both clients;
- **paired**: per repeat, the relative difference of the two runs that sent the same requests back to back; mean and
  95% t interval over the repeats. It removes what the pair shares (the request list, slow drift of the server).

Also per client: the run-to-run standard deviation (relative to the mean), which shows whose noise sets the interval,
and the number of runs per client that would bring the pooled interval inside the tolerance at the same noise.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repo root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.device.fidelity import GATED, Run, _pct, _t975, compare  # noqa: E402


@dataclass(frozen=True)
class Paired:
    metric: str
    pairs: int
    mean_rel_diff: float
    ci95: tuple[float, float] | None  # None with fewer than 2 pairs


@dataclass(frozen=True)
class Noise:
    metric: str
    autotune_rel_sd: float | None  # run-to-run standard deviation / mean
    sglang_rel_sd: float | None
    runs_needed: int | None  # per client, for the pooled interval to fit inside the tolerance (None: cannot)


def load_runs(dirs: Sequence[Path]) -> list[Run]:
    """All runs of the checks; check k's repeat r becomes repeat 1000 k + r so pairs stay within their check."""
    runs: list[Run] = []
    for k, d in enumerate(dirs):
        path = d / "runs.jsonl"
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: is {d} a fidelity.py --out folder?")
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                row["repeat"] = 1000 * k + int(row["repeat"])
                runs.append(Run(**row))
    return runs


def paired(runs: Sequence[Run], metric: str) -> Paired | None:
    by: dict[int, dict[str, float]] = {}
    for r in runs:
        value = getattr(r, metric)
        if value is not None:
            by.setdefault(r.repeat, {})[r.client] = value
    diffs = [(v["autotune"] - v["sglang"]) / v["sglang"] for v in by.values() if {"autotune", "sglang"} <= v.keys()]
    if not diffs:
        return None
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return Paired(metric, len(diffs), mean, None)
    half = _t975(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return Paired(metric, len(diffs), mean, (mean - half, mean + half))


def noise(runs: Sequence[Run], metric: str, rel_diff: float | None, tolerance: float) -> Noise:
    sds: dict[str, float | None] = {}
    for client in ("autotune", "sglang"):
        vals = [v for r in runs if r.client == client and (v := getattr(r, metric)) is not None]
        sds[client] = statistics.stdev(vals) / statistics.fmean(vals) if len(vals) >= 2 else None
    needed = None
    a, s = sds["autotune"], sds["sglang"]
    if a is not None and s is not None and rel_diff is not None and abs(rel_diff) < tolerance:
        room = tolerance - abs(rel_diff)  # the interval's half-width must fit between the estimate and the bound
        needed = max(2, math.ceil(1.96**2 * (a**2 + s**2) / room**2))
    return Noise(metric, a, s, needed)


def format_pooled(dirs: Sequence[Path], runs: Sequence[Run], tolerance: float) -> str:
    per_client = {c: sum(1 for r in runs if r.client == c) for c in ("autotune", "sglang")}
    lines = [
        f"## Fidelity, pooled over {len(dirs)} checks: {per_client['autotune']} autotune runs, "
        f"{per_client['sglang']} bench_serving runs",
        "",
        "Checks: " + ", ".join(f"`{d.name}`" for d in dirs) + ".",
        "",
        "| metric | autotune vs SGLang (pooled) | 95% interval (Welch) | decided | paired: mean of pairs | 95% interval "
        "(paired) | run-to-run sd: autotune | sd: SGLang | runs a client to decide |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for c in compare(runs, tolerance):
        p = paired(runs, c.metric)
        n = noise(runs, c.metric, c.rel_diff, tolerance)
        ci = "-" if c.rel_diff_ci95 is None else f"{_pct(c.rel_diff_ci95[0])} .. {_pct(c.rel_diff_ci95[1])}"
        pci = "-" if p is None or p.ci95 is None else f"{_pct(p.ci95[0])} .. {_pct(p.ci95[1])}"
        gated = c.metric in GATED
        lines.append(
            f"| {c.metric} | {_pct(c.rel_diff)} | {ci} | {c.decided or '-'} | {_pct(p.mean_rel_diff if p else None)} | "
            f"{pci} | {_pct(n.autotune_rel_sd).lstrip('+')} | {_pct(n.sglang_rel_sd).lstrip('+')} | "
            f"{(n.runs_needed if n.runs_needed is not None else '-') if gated else '-'} |"
        )
    lines += [
        "",
        "decided: the pooled interval inside the tolerance (agrees), outside it (differs), across a bound (undecided). "
        f"Runs a client to decide: at the measured noise, the runs per client at which the pooled interval's half-width "
        f"fits between the estimate and the nearer bound of +-{100 * tolerance:g}% (normal approximation).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("checks", nargs="+", type=Path)
    p.add_argument("--out", type=Path, help="also write the table here")
    p.add_argument("--tolerance", type=float, default=0.03)
    args = p.parse_args(argv)
    try:
        runs = load_runs(args.checks)
    except (FileNotFoundError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    md = format_pooled(args.checks, runs, args.tolerance)
    if args.out:
        args.out.write_text(md)
    print(md, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
