"""The GPU-memory prediction (``autotune.policy.fit``) against real launches: which OOM launches it would have avoided, which
good launches it would have set aside, and how close its KV-cache size is to what SGLang allocated.

    python -m benchmarks.search.oom [--gpu-mib 143771] [DIR ...]    (default: every study under results/evidence/h200*)

Sizes come from the model directory's config.json, or the dummy shape of the same name (the H200 studies served
``/tmp/models/llama-1b`` etc. with dummy weights). ``--gpu-mib`` is the GPU's total memory as nvidia-smi reports it
(an H200: 143771 MiB).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.engines import sglang_rules
from autotune.engines.memory import FitError, from_model_dir
from autotune.engines.sglang_model import SGLANG
from autotune.policy import fit

ROOT = Path(__file__).resolve().parents[2]
H200_MIB = 143771
MEMORY_FAILURES = ("oom_at_launch", "graph_capture_failed")


@dataclass(frozen=True)
class Row:
    study: str
    number: int
    outcome: str
    failure: str | None
    predicted_fits: bool
    reason: str
    kv_predicted: int | None
    kv_actual: int | None


def evaluate(study_dir: Path, gpu_bytes: float) -> list[Row]:
    spec = json.loads((study_dir / "study.json").read_text())
    server = spec["server"]
    drafters = tuple(
        str(c)
        for p in spec["params"]
        for c in (p.get("choices") or ())
        if p.get("flag") == sglang_rules.DRAFT_MODEL and c
    )
    sizes = from_model_dir(server["model_path"], gpu_bytes, drafters=drafters)
    rows = []
    for line in (study_dir / "trials.jsonl").read_text().splitlines():
        r: dict[str, Any] = json.loads(line)
        if r["outcome"] == "invalid":
            continue  # never launched
        pred = fit.predict(sizes, r["flags"], tp_size=int(server["tp_size"]), model=SGLANG)
        rows.append(
            Row(
                study_dir.name,
                r["number"],
                r["outcome"],
                r.get("failure"),
                pred.fits,
                pred.reason,
                pred.kv_tokens,
                (r.get("phases") or {}).get("kv_cache_tokens"),
            )
        )
    return rows


def summary(rows: list[Row]) -> str:
    oom = [r for r in rows if r.failure in MEMORY_FAILURES]
    good = [r for r in rows if r.outcome == "complete"]
    other = [r for r in rows if r.outcome != "complete" and r.failure not in MEMORY_FAILURES]
    lines = [
        "| study | launches | OOM/capture launches | avoided | completed launches | wrongly set aside | other failures (set aside) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for study in [*dict.fromkeys(r.study for r in rows), "all"]:
        sel = [r for r in rows if study in ("all", r.study)]
        o = [r for r in sel if r in oom]
        g = [r for r in sel if r in good]
        x = [r for r in sel if r in other]
        lines.append(
            f"| {study} | {len(sel)} | {len(o)} | {sum(not r.predicted_fits for r in o)} | {len(g)} | "
            f"{sum(not r.predicted_fits for r in g)} | {len(x)} ({sum(not r.predicted_fits for r in x)}) |"
        )
    kv = [(r.kv_predicted, r.kv_actual) for r in rows if r.kv_predicted and r.kv_actual]
    if kv:
        errs = [p / a - 1 for p, a in kv]
        lines.append(
            f"\nKV-cache tokens predicted vs allocated ({len(kv)} launches): error {min(errs):+.1%} .. {max(errs):+.1%}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.search.oom",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("dirs", nargs="*", type=Path)
    ap.add_argument("--gpu-mib", type=float, default=H200_MIB)
    ap.add_argument("--json", type=Path, help="also write every row here")
    a = ap.parse_args(argv)
    dirs = a.dirs or sorted({p.parent for p in (ROOT / "results" / "evidence").glob("h200*/**/trials.jsonl")})
    rows: list[Row] = []
    for d in dirs:
        try:
            rows += evaluate(d, a.gpu_mib * 1024 * 1024)
        except FitError as exc:  # a model whose sizes are unknown offline (real weights not on this machine)
            print(f"left out {d.name}: {exc}", file=sys.stderr)
    print(summary(rows))
    for r in rows:
        if (r.failure in MEMORY_FAILURES) == r.predicted_fits:
            print(f"  mispredicted: {r.study} #{r.number} {r.outcome}/{r.failure}: {r.reason}")
    if a.json:
        a.json.write_text(json.dumps([r.__dict__ for r in rows], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
