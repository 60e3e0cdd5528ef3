"""Merge results files of earlier sweeps into one baseline file for ``table``: their ``autotune`` runs renamed (the
searcher they ran is not this checkout's), and landscapes that were redefined or re-run later dropped.

    python -m benchmarks.search.merge_baseline --rename autotune-85c81ba --drop-variant high-load loose-slo \
        --drop nccl/poor-drafter --out OUT.json IN.json [IN.json ...]
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.search import jsonio


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.search.merge_baseline",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("files", nargs="+")
    ap.add_argument("--rename", required=True, help="the name the files' autotune runs get")
    ap.add_argument("--drop-variant", nargs="*", default=[], help="variants left out (every space)")
    ap.add_argument("--drop", nargs="*", default=[], help="SPACE/VARIANT landscapes left out")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    out: dict[str, Any] = {
        "commands": [],
        "launches": None,
        "simulated": True,
        "complete": True,
        "runs": [],
        "merged_by": "python -m benchmarks.search.merge_baseline",
    }
    for f in a.files:
        doc = jsonio.load(f)
        out["commands"].append(doc["command"])
        out["launches"] = min(doc["launches"], out["launches"] or doc["launches"])
        for run in doc["runs"]:
            if run["variant"] in a.drop_variant or f"{run['space']}/{run['variant']}" in a.drop:
                continue
            if run["method"] == "autotune":
                run["method"] = a.rename
            out["runs"].append(run)
    jsonio.dump(out, a.out)
    print(f"{len(out['runs'])} runs from {len(a.files)} files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
