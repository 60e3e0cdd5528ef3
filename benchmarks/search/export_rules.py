"""Judge another export rule on a sweep's own runs, offline: every run's launches are measured again in order with the
same noise stream (``Lab`` draws noise only for completed launches, in launch order, so the records are the run's
own), and after each launch both ``select_best`` and the other rule choose; the table compares them, paired.

    python -m benchmarks.search.export_rules FILE.json.gz ... [--rule gp|mean] [--noise 0.04] [--hard] [--method autotune]

Rules (both tried for issue #14 and dropped, docs/search.md):
- ``gp``: a Gaussian process over the measured points (log objective; kernel exp(-distance / l), the distance of
  ``autotune.space.enumerate.distance``; l and the noise share fitted by marginal likelihood on a grid) smooths each
  measurement with its neighbours'; the feasible point with the highest posterior mean is exported.
- ``mean``: a config measured more than once is judged by the mean of its launches, not its best one.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autotune.space import StudySpec
from autotune.space.enumerate import distance
from autotune.trial.records import TrialOutcome, TrialRecord
from benchmarks.search import jsonio
from benchmarks.search.drivers import Lab
from benchmarks.search.landscape import Landscape
from benchmarks.search.metrics import launches_to
from benchmarks.search.sweep import cached_landscape

Rule = Callable[[StudySpec, Sequence[TrialRecord], str], TrialRecord | None]
LENGTHS = (0.25, 0.5, 1.0, 2.0, 4.0)
NOISE_SHARES = (1e-6, 1e-3, 3e-3, 1e-2, 3e-2, 0.1, 0.3, 1.0)


def _measured(records: Sequence[TrialRecord], key: str) -> list[TrialRecord]:
    return [r for r in records if r.outcome is TrialOutcome.COMPLETE and (r.objectives.get(key) or 0) > 0]


def gp_rule(spec: StudySpec, records: Sequence[TrialRecord], key: str) -> TrialRecord | None:
    data = _measured(records, key)
    feasible = [i for i, r in enumerate(data) if r.feasible]
    if not feasible:
        return None
    y = np.log([float(r.objectives[key]) for r in data])
    n = len(y)
    d = np.array([[distance(spec, dict(a.params), dict(b.params)) for b in data] for a in data])
    yc = y - y.mean()
    fit: tuple[float, np.ndarray, np.ndarray] | None = None
    for length in LENGTHS:
        k = np.exp(-d / length)
        for share in NOISE_SHARES:
            try:
                chol = np.linalg.cholesky(k + share * np.eye(n))
            except np.linalg.LinAlgError:
                continue
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, yc))
            scale = max(float(yc @ alpha) / n, 1e-12)  # the signal variance that maximises the likelihood
            nll = 0.5 * n * math.log(scale) + float(np.log(np.diag(chol)).sum())
            if fit is None or nll < fit[0]:
                fit = (nll, k, alpha)
    if fit is None:
        return None
    posterior = y.mean() + fit[1] @ fit[2]
    return data[max(feasible, key=lambda i: (posterior[i], -data[i].number))]


def mean_rule(spec: StudySpec, records: Sequence[TrialRecord], key: str) -> TrialRecord | None:
    groups: dict[str, list[TrialRecord]] = {}
    for r in _measured(records, key):
        groups.setdefault(json.dumps(r.params, sort_keys=True, default=str), []).append(r)
    best: tuple[float, int, TrialRecord] | None = None
    for runs in groups.values():
        margins: dict[str, list[float]] = {}
        for r in runs:
            for name, v in r.constraints.items():
                margins.setdefault(name, []).append(v)
        if any(statistics.fmean(v) > 0 for v in margins.values()):
            continue
        value, first = statistics.fmean(float(r.objectives[key]) for r in runs), min(r.number for r in runs)
        if best is None or value > best[0] or (value == best[0] and first < best[1]):
            best = (value, first, runs[0])
    return best[2] if best else None


RULES: dict[str, Rule] = {"gp": gp_rule, "mean": mean_rule}


def replay(run: dict[str, Any], land: Landscape, rule: Rule) -> tuple[list[float], list[float]]:
    """The run's ratios under ``select_best`` (as recorded) and under ``rule``, after each launch."""
    lab = Lab(land, run["noise"], run["seed"], run["optimum"])
    key = lab.objectives[0].key
    other: list[float] = []
    for i, params in enumerate(run["launched"]):
        lab.record(i, f"t{i}", params)
        chosen = rule(land.spec, lab.records, key)
        other.append(land.evaluate(dict(chosen.params)).true_value / run["optimum"] if chosen else 0.0)
    return list(lab.ratios), other


def compare(runs: list[dict[str, Any]], rule: Rule) -> list[dict[str, Any]]:
    lands: dict[tuple[str, str], Landscape] = {}
    out = []
    for run in runs:
        k = (run["space"], run["variant"])
        if k not in lands:
            lands[k] = cached_landscape(*k)[0]
        base, other = replay(run, lands[k], rule)
        if any(abs(a - b) > 1e-9 for a, b in zip(base, run["ratios"], strict=False)):
            raise SystemExit(
                f"{k} seed {run['seed']}: the replay does not reproduce the run (another searcher or "
                f"landscape version?)"
            )
        out.append({**{f: run[f] for f in ("space", "variant", "noise", "seed")}, "base": base, "other": other})
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| noise | space | runs | rule | median launches to 98% | within 4 | mean launches (41: never) "
        "| within 2% at 10 | within 2% at 40 |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for noise in sorted({r["noise"] for r in rows}):
        for space in [*sorted({r["space"] for r in rows}), "pooled"]:
            sel = [r for r in rows if r["noise"] == noise and space in ("pooled", r["space"])]
            for which in ("base", "other"):
                steps = [launches_to(r[which]) for r in sel]
                lines.append(
                    f"| {noise:.0%} | {space} | {len(sel)} | {'select_best' if which == 'base' else 'other'} | "
                    f"{statistics.median(steps):g} | {sum(x <= 4 for x in steps) / len(sel):.1%} | "
                    f"{statistics.fmean(min(x, 41) for x in steps):.2f} | "
                    f"{sum(r[which][min(9, len(r[which]) - 1)] >= 0.98 for r in sel) / len(sel):.1%} | "
                    f"{sum(r[which][-1] >= 0.98 for r in sel) / len(sel):.1%} |"
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.search.export_rules",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rule", choices=sorted(RULES), default="gp")
    ap.add_argument("--method", default="autotune")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.0, 0.04])
    ap.add_argument("--hard", action="store_true", help="only landscapes where no seed point is within 2%%")
    a = ap.parse_args(argv)
    runs = [
        r
        for f in a.files
        for r in jsonio.load(f)["runs"]
        if r["method"] == a.method and r["noise"] in a.noise and not (a.hard and r["seed_within_2pct"])
    ]
    if not runs:
        print("no runs match", file=sys.stderr)
        return 1
    print(table(compare(runs, RULES[a.rule])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
