"""How many of autotune's product files a change would touch, counted from the code (``autotune/**/*.py``; tests,
docs and benchmarks are not counted).

Usage: ``python tools/where_to_change.py [--rev REV ...]`` prints one column per tree: the working tree, and each
git revision named (e.g. ``--rev 41444b1``). ``docs/architecture.md``'s "Where to change what" table records the
counts; ``tests/tools/test_where_to_change.py`` checks its "now" column against the working tree.

The counting rule. Each module is parsed (``ast``); what counts is its code, not its prose: imports, names
(identifiers, attributes, arguments, keywords) and string constants other than docstrings. A comment or a docstring
that mentions a thing does not count. A change touches a module when the module's code holds what the change must
alter there, and each change adds the files it needs of its own:

- new engine: a module outside the existing engines' own code (``engines/sglang*.py``, ``sim/`` with the simulator's
  adapter, and ``engines/sim.py`` where an older revision has it) that names an engine by its string (``"sglang"``,
  ``"sim"``) or imports an engine's own module (``autotune.engines.sglang*``, ``autotune.engines.sim``,
  ``autotune.sim``); plus 1 (the new engine's adapter). The registry (``engines/__init__.py``), which names every
  engine, counts: the new engine's entry goes there.
- request-rate load: a module whose code names a concurrency (an identifier or string ``concurrency`` or
  ``concurrencies``): a load level read as a number of requests in flight; plus 0 (the rate is a new kind of level,
  not a new file, where levels are typed).
- ShareGPT workload: a module whose code holds a workload kind as a string constant (``"synthetic"``, ``"jsonl"``):
  where kinds are listed, built or branched on; plus 1 (the new kind's loader).
- Kubernetes export: a module outside the existing documents' own writers (``export/serve_config.py``,
  ``export/ray_llm.py``, ``export/launch_script.py``) whose code names an exported deployment document (a string
  constant ending in ``serve_config.yaml``, ``launch.sh``, ``rehearse_sim.sh``, ``ray_llm.py`` or
  ``ray_llm_config.yaml``) or imports one of those writers: where the documents are listed, written or read back;
  plus 1 (the new document's writer).
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENGINE_NAMES = {"sglang", "sim"}
ENGINE_OWN = ("autotune/engines/sglang", "autotune/engines/sim.py", "autotune/sim/")
ENGINE_MODULES = ("autotune.engines.sglang", "autotune.engines.sim", "autotune.sim")
LOAD_NAMES = {"concurrency", "concurrencies"}
WORKLOAD_KINDS = {"synthetic", "jsonl"}
EXPORT_DOCUMENTS = ("serve_config.yaml", "launch.sh", "rehearse_sim.sh", "ray_llm.py", "ray_llm_config.yaml")
EXPORT_WRITERS = ("autotune.export.serve_config", "autotune.export.ray_llm", "autotune.export.launch_script")
EXPORT_OWN = ("autotune/export/serve_config.py", "autotune/export/ray_llm.py", "autotune/export/launch_script.py")


@dataclass
class ModuleCode:
    """What a module's code holds, prose left out."""

    path: str  # relative to the repository root, with "/"
    imports: set[str] = field(default_factory=set)  # full dotted names, "from a import b" as "a" and "a.b"
    names: set[str] = field(default_factory=set)
    strings: set[str] = field(default_factory=set)


def module_name(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_code(path: str, source: str) -> ModuleCode:
    tree = ast.parse(source, filename=path)
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    code = ModuleCode(path)
    package = module_name(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            code.imports |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            code.imports.add(base)
            code.imports |= {f"{base}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Name):
            code.names.add(node.id)
        elif isinstance(node, ast.Attribute):
            code.names.add(node.attr)
        elif isinstance(node, ast.arg):
            code.names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            code.names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            code.strings.add(node.value)
    return code


def imports_any(code: ModuleCode, prefixes: Iterable[str]) -> bool:
    """Whether the module imports one of ``prefixes`` or a module under it or beside it with the prefix's name
    (``autotune.engines.sglang`` covers ``autotune.engines.sglang_facts``)."""
    return any(name == p or name.startswith((p + ".", p + "_")) for name in code.imports for p in prefixes)


def new_engine(code: ModuleCode) -> bool:
    if code.path.startswith(ENGINE_OWN):
        return False
    return bool(code.strings & ENGINE_NAMES) or imports_any(code, ENGINE_MODULES)


def request_rate_load(code: ModuleCode) -> bool:
    return bool((code.names | code.strings) & LOAD_NAMES)


def sharegpt_workload(code: ModuleCode) -> bool:
    return bool(code.strings & WORKLOAD_KINDS)


def kubernetes_export(code: ModuleCode) -> bool:
    if code.path in EXPORT_OWN:
        return False
    named = any(s.endswith(EXPORT_DOCUMENTS) for s in code.strings)
    return named or imports_any(code, EXPORT_WRITERS)


@dataclass(frozen=True)
class Change:
    name: str
    touches: Callable[[ModuleCode], bool]
    new_files: int  # the files the change adds of its own


CHANGES = (
    Change("new engine", new_engine, 1),
    Change("request-rate load", request_rate_load, 0),
    Change("ShareGPT workload", sharegpt_workload, 1),
    Change("Kubernetes export", kubernetes_export, 1),
)


def tree_sources(rev: str | None, root: Path = ROOT) -> dict[str, str]:
    """``path -> source`` of every ``autotune/**/*.py``, in the working tree or at a git revision."""
    if rev is None:
        return {p.relative_to(root).as_posix(): p.read_text() for p in sorted((root / "autotune").rglob("*.py"))}
    run = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "autotune/"], cwd=root, capture_output=True, text=True
    )
    if run.returncode != 0:
        raise SystemExit(
            f"where_to_change: git cannot list {rev!r}: {run.stderr.strip()}. Fix: name a commit of "
            "this repository (e.g. 41444b1)"
        )
    paths = [p for p in run.stdout.split() if p.endswith(".py")]
    return {
        p: subprocess.run(["git", "show", f"{rev}:{p}"], cwd=root, capture_output=True, text=True, check=True).stdout
        for p in paths
    }


def touched(sources: dict[str, str]) -> dict[str, list[str]]:
    """For each change, the files it touches (existing ones, sorted)."""
    codes = [read_code(path, src) for path, src in sources.items()]
    return {c.name: sorted(code.path for code in codes if c.touches(code)) for c in CHANGES}


def counts(sources: dict[str, str]) -> dict[str, int]:
    """For each change, the files it touches: existing files by the rule, plus the files it adds."""
    found = touched(sources)
    return {c.name: len(found[c.name]) + c.new_files for c in CHANGES}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rev", action="append", default=[], help="also count at this git revision (repeatable)")
    p.add_argument("--list", action="store_true", help="list the files each change touches (working tree)")
    args = p.parse_args(argv)
    columns = {rev: counts(tree_sources(rev)) for rev in args.rev}
    columns["now"] = counts(tree_sources(None))
    width = max(len(c.name) for c in CHANGES)
    print(f"| {'change':{width}} | " + " | ".join(columns) + " |")
    print(f"| {'-' * width} | " + " | ".join("-" * len(k) for k in columns) + " |")
    for c in CHANGES:
        print(f"| {c.name:{width}} | " + " | ".join(f"{col[c.name]:>{len(k)}}" for k, col in columns.items()) + " |")
    if args.list:
        for name, paths in touched(tree_sources(None)).items():
            print(f"\n{name}:\n  " + "\n  ".join(paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
