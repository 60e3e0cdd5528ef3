"""The chain speed model (``autotune.policy.specmodel``) against measured chains: fitted on the point without speculation and
one chain length, what it predicts for the other lengths, and what was measured.

    python -m benchmarks.search.chain STUDY_DIR [--fit-steps 3] [--json FILE]

STUDY_DIR holds a study's ``trials.jsonl`` with points that differ only in ``--speculative-num-steps`` (top-k 1) and
one without speculation (``tools/device/spaces/h200-tp1-chain-steps.yaml``). Per load level: each chain's measured
throughput and accept length, the model's prediction from the fitting pair, and whether the model orders the
measured chains as they ran (the order the coordinate step would try them in).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotune.engines import sglang_rules
from autotune.engines.sglang_facts import simulated_accept_length
from autotune.policy.specmodel import chain_steps, fit


@dataclass(frozen=True)
class Row:
    level: int
    steps: int | None  # None: without speculation
    measured: float  # output tokens/s
    accept_length: float | None
    predicted: float | None  # from the fitting pair (None for the pair itself and without a fit)
    engine: str


def _chain(record: dict[str, Any]) -> int | None | bool:
    """The record's step count (top-k 1), None without speculation, False for anything else."""
    flags = record.get("flags") or {}
    if sglang_rules.algorithm(flags) is None:
        return None
    steps = chain_steps(flags)
    return False if steps is None else steps


def rows(study_dir: Path, fit_steps: int = 3) -> list[Row]:
    records = [json.loads(line) for line in (study_dir / "trials.jsonl").read_text().splitlines() if line.strip()]
    done = [r for r in records if r.get("outcome") == "complete" and _chain(r) is not False]
    out: list[Row] = []
    levels = sorted({lv["concurrency"] for r in done for lv in r["bench"]["levels"]})
    for level in levels:
        at: dict[int | None, tuple[float, float | None, str]] = {}
        for r in done:
            lv = next((x for x in r["bench"]["levels"] if x["concurrency"] == level), None)
            if lv is not None:
                at[_chain(r)] = (lv["output_tok_per_s"], lv.get("accept_length"), (r.get("engine") or {}).get("engine", "?"))
        model = None
        if None in at and fit_steps in at and at[fit_steps][1] is not None:
            env = next((r.get("env") or {} for r in done if _chain(r) == fit_steps), {})
            model = fit(fit_steps, at[fit_steps][1], at[fit_steps][0] / at[None][0], simulated_accept_length(env))
        for steps in sorted(at, key=lambda s: -1 if s is None else s):
            t, acc, engine = at[steps]
            pred = (model.speedup(steps) * at[None][0] if model is not None and steps not in (None, fit_steps)
                    else None)
            out.append(Row(level, steps, t, acc, pred, engine))
    return out


def direction_agrees(table: list[Row], level: int, fit_steps: int) -> bool | None:
    """Whether the model puts k - 1 and k + 1 steps (k = ``fit_steps``) in the order they measured: the choice the
    coordinate step makes with it. None when either was not measured or not predicted."""
    at = {r.steps: r for r in table if r.level == level}
    down, up = at.get(fit_steps - 1), at.get(fit_steps + 1)
    if down is None or up is None or down.predicted is None or up.predicted is None:
        return None
    return (down.predicted > up.predicted) == (down.measured > up.measured)


def best_agrees(table: list[Row], level: int) -> bool | None:
    """Whether the chain the model predicts fastest (the fitting one at its measured value) is the fastest measured."""
    chains = [r for r in table if r.level == level and r.steps is not None]
    if len(chains) < 2:
        return None
    predicted = max(chains, key=lambda r: r.predicted if r.predicted is not None else r.measured)
    return predicted.steps == max(chains, key=lambda r: r.measured).steps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.search.chain", description=__doc__.split("\n\n")[0])
    ap.add_argument("study_dir", type=Path)
    ap.add_argument("--fit-steps", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    if not (a.study_dir / "trials.jsonl").is_file():
        print(f"error: {a.study_dir}/trials.jsonl not found: give a study's results folder", file=sys.stderr)
        return 2
    table = rows(a.study_dir, a.fit_steps)
    print("| level | steps | measured tok/s | accept length | predicted tok/s | predicted / measured | engine |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in table:
        ratio = f"{r.predicted / r.measured:.3f}" if r.predicted else "-"
        print(f"| {r.level} | {'off' if r.steps is None else r.steps} | {r.measured:,.0f} | "
              f"{'-' if r.accept_length is None else f'{r.accept_length:.2f}'} | "
              f"{'-' if r.predicted is None else f'{r.predicted:,.0f}'} | {ratio} | {r.engine} |")
    for level in sorted({r.level for r in table}):
        print(f"level {level}: {a.fit_steps - 1} vs {a.fit_steps + 1} steps ordered as measured: "
              f"{direction_agrees(table, level, a.fit_steps)}; fastest chain as measured: {best_agrees(table, level)}")
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in table], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
