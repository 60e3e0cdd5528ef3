"""Rewrite references to autotune's old flat module paths (up to 41444b1) to the package layout.

For a branch started before the move: ``python tools/relayout.py`` (from the repository root) rewrites, in every
tracked text file outside ``results/``, ``autotune.X`` / ``autotune/X.py`` / ``from autotune import X`` and the moved
tests' paths (``tests.test_X`` / ``tests/test_X.py``) to where they are now; then run
``ruff check --select I --fix`` on the files it changed (import order) and read the diff. ``--move`` also did the
``git mv`` of the move itself (once, on the commit before it). Note: it rewrites ``python -m autotune.verify`` to
``autotune.verify.__main__``; undo that for command lines (the package runs as ``python -m autotune.verify``)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
MOVES = {  # old module -> new module (under autotune.)
    **{
        m: f"core.{m}"
        for m in [
            "failures",
            "trial",
            "secrets",
            "gpus",
            "cpusets",
            "virtual_clock",
            "dashboard_attrs",
            "errors",
            "site",
        ]
    },
    **{m: f"trial.{m}" for m in ["records", "store", "score", "replica", "launcher", "registry", "slots"]},
    **{m: f"policy.{m}" for m in ["prescreen", "repair", "learned", "kvmodel", "fit", "specmodel", "stopping"]},
    "finalists": "finalists.choice",
    "finalist_store": "finalists.store",
    **{
        m: f"study.{m}"
        for m in [
            "driver",
            "searcher",
            "optuna_study",
            "storage",
            "studylock",
            "cluster",
            "interrupts",
            "runner",
            "finalist_stage",
        ]
    },
    "verify": "verify.__main__",
    "verify_compare": "verify.compare",
    "verify_report": "verify.report",
    "verify_sglang": "verify.sglang",
    "study_summary": "report.study_summary",
    "spaces": "space.spaces",
}
TESTS = {  # tests/test_X.py -> tests/<dir>/test_X.py
    "core": ["cpusets", "dashboard_attrs", "errors", "site"],
    "trial": ["launcher", "registry", "replica", "score", "slots", "store"],
    "policy": ["fit", "repair", "specmodel", "stopping"],
    "finalists": ["finalists"],
    "study": ["cluster", "killed_driver", "runner", "searcher", "storage_postgres"],
    "verify": ["verify"],
    "space": ["space", "space_enumerate"],
}
TEST_MOVES = {f"test_{t}": f"{d}.test_{t}" for d, ts in TESTS.items() for t in ts}
NAMES = "|".join(sorted(MOVES, key=len, reverse=True))
TNAMES = "|".join(sorted(TEST_MOVES, key=len, reverse=True))


def git(*args):
    subprocess.run(["git", *args], check=True)


def do_moves():
    for old, new in MOVES.items():
        dst = ROOT / "autotune" / Path(*new.split(".")).with_suffix(".py")
        dst.parent.mkdir(exist_ok=True)
        git("mv", f"autotune/{old}.py", str(dst.relative_to(ROOT)))
    for test, new in TEST_MOVES.items():
        dst = ROOT / "tests" / Path(*new.split(".")).with_suffix(".py")
        dst.parent.mkdir(exist_ok=True)
        git("mv", f"tests/{test}.py", str(dst.relative_to(ROOT)))


FROM_IMPORT = re.compile(r"^(?P<ind>[ \t]*)from autotune import (?P<names>[^\n(]+)$", re.M)


def rewrite_from_autotune(m):
    ind = m["ind"]
    names = m["names"]
    comment = ""
    if "#" in names:
        names, comment = names.split("#", 1)
        comment = "  #" + comment
    items = [n.strip() for n in names.split(",") if n.strip()]
    if not any(i.split(" as ")[0] in MOVES for i in items):
        return m.group(0)
    groups: dict[str, list[str]] = {}
    for item in items:
        name, _, alias = item.partition(" as ")
        if name in MOVES:
            pkg, _, mod = MOVES[name].rpartition(".")
            alias = alias or (name if mod != name else "")
            groups.setdefault(f"autotune.{pkg}", []).append(f"{mod} as {alias}" if alias else mod)
        else:
            groups.setdefault("autotune", []).append(item)
    lines = [f"{ind}from {src} import {', '.join(ns)}" for src, ns in sorted(groups.items())]
    lines[0] += comment
    return "\n".join(lines)


def rewrite(text: str) -> str:
    text = re.sub(rf"\bautotune\.({NAMES})\b", lambda m: f"autotune.{MOVES[m[1]]}", text)
    text = FROM_IMPORT.sub(rewrite_from_autotune, text)
    text = re.sub(rf"\bautotune/({NAMES})\.py\b", lambda m: f"autotune/{MOVES[m[1]].replace('.', '/')}.py", text)
    text = re.sub(rf"\btests\.({TNAMES})\b", lambda m: f"tests.{TEST_MOVES[m[1]]}", text)
    text = re.sub(rf"\btests/({TNAMES})\.py\b", lambda m: f"tests/{TEST_MOVES[m[1]].replace('.', '/')}.py", text)
    return text


def files():
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    for f in out:
        p = ROOT / f
        if f.startswith("results/") or "/results/" in f or not p.is_file():
            continue
        if p.suffix in (".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".txt", ".cfg", ".ini") or f == ".ci/run":
            yield p


if __name__ == "__main__":
    if "--move" in sys.argv:
        do_moves()
    changed = 0
    for p in files():
        try:
            t = p.read_text()
        except UnicodeDecodeError:
            continue
        n = rewrite(t)
        if n != t:
            p.write_text(n)
            changed += 1
    print("rewritten", changed)
