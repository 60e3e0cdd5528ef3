"""Compare two simulated studies' directories: the records (number, parameters, outcome, objectives, constraints) and
every file of ``best/`` with trial ids (Ray Tune draws them), server ports and the study directory's name masked.
Usage: python compare_best.py BEFORE/smoke AFTER/smoke"""

import difflib
import json
import re
import sys
from pathlib import Path


def records(root: Path) -> list[tuple]:
    rows = [json.loads(line) for line in (root / "trials.jsonl").read_text().splitlines()]
    return [(r["number"], r["params"], r["outcome"], r.get("objectives"), r.get("constraints")) for r in rows]


def trial_ids(root: Path) -> set[str]:
    return {json.loads(line)["trial_id"] for line in (root / "trials.jsonl").read_text().splitlines()}


before, after = Path(sys.argv[1]), Path(sys.argv[2])
print("records the same:", records(before) == records(after), f"({len(records(before))} trials)")
ids = trial_ids(before) | trial_ids(after)


def masked(text: str, root: Path) -> str:
    for i in sorted(ids, key=len, reverse=True):
        text = text.replace(i, "<trial id>")
    text = text.replace(str(root.parent), "<dir>")
    return re.sub(r"(--(?:nccl-)?port\"?,?\s*\"?)\d+", r"\1<port>", text)


for name in sorted(p.name for p in (before / "best").iterdir()):
    a = masked((before / "best" / name).read_text(), before).splitlines()
    b = masked((after / "best" / name).read_text(), after).splitlines()
    changed = [x for x in difflib.unified_diff(a, b, lineterm="", n=0) if x[:1] in "+-" and x[:3] not in ("+++", "---")]
    print(f"{name}: " + ("the same" if not changed else f"{len(changed)} lines differ, e.g. {changed[:2]}"))
