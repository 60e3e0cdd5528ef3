"""The layering, checked from the source: no import cycle between autotune's units (its subpackages, its top-level
modules, and a subpackage's CLI ``__main__``), none between ``autotune`` and ``serve_app``, and the forbidden edges
absent.

Every ``import`` statement counts, also one inside a function or under ``TYPE_CHECKING``: a lazy import is still a
dependency. The graph is printed by ``python -m tests.test_import_graph`` (docs/architecture.md describes it).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# (from, to): edges the layering forbids. "serve_app" is only an import path for exported configs.
FORBIDDEN = {
    ("autotune.core", "*"): "core is the leaf layer: every layer names its failures, errors and trial values",
    ("autotune.space", "autotune.engines"): "the search space knows no engine (the engine normalizes a trial's flags)",
    ("autotune.bench", "autotune.trial"): "the benchmark does not know trial records",
    ("autotune.engines", "autotune.trial"): "engines speak failures and phases, not records",
    ("autotune.trial", "autotune.serve"): "the Serve boundary's records know nothing of Serve",
    ("autotune.trial", "autotune.study"): "a trial's parts know nothing of the runner or the study",
    ("autotune.export", "autotune.policy"): "the export reads records and finalists, not the search policy",
    ("autotune.export", "autotune.study"): "the export reads what a study stored, not how it ran",
    ("autotune.finalists", "autotune.study"): "the finalists' choice and store are data the export may import",
    ("autotune.policy", "autotune.study"): "the policy decides; the study runs (the searcher holds the policy)",
    ("autotune.policy", "autotune.sim"): "the policy reads sizes through the engine (Engine.memory_sizes)",
    ("autotune.trial", "autotune.sim"): "a trial's parts launch any engine; the simulator is one behind the registry",
}
# Module edges below the unit level: (importer, imported), each a module or a package prefix. The search policy reads
# an engine through its model and the registry, never SGLang's own modules; the runner names no engine.
FORBIDDEN_MODULES = {
    ("autotune.policy", "autotune.engines.sglang"): "the policy reads the engine's model (engines.base, the registry)",
    ("autotune.policy", "autotune.engines.sglang_facts"): "the policy reads the engine's model, not SGLang's facts",
    ("autotune.policy", "autotune.engines.sglang_rules"): "the policy reads the engine's model, not SGLang's rules",
    ("autotune.policy", "autotune.engines.sglang_model"): "the policy asks the registry for the study's engine model",
    ("autotune.study.runner", "autotune.sim"): "the runner asks the engine registry; it never loads a sim profile",
    ("autotune.study.runner", "autotune.engines.sglang"): "the runner names no engine",
    ("autotune.study.runner", "autotune.engines.sglang_facts"): "the runner reads the engine's model",
    ("autotune.study.runner", "autotune.engines.sglang_rules"): "the runner reads the engine's model",
}
LEAVES_ALLOWED: set[str] = set()  # a leaf unit may import only these (and the package's version)
# (from, to package): the only modules of ``to`` that ``from`` may import. The export reads the finalist stage's
# results as data; the choice, the store and the stage that relaunches are not its business.
ONLY_MODULES = {
    ("autotune.export", "autotune.finalists"): (
        {"autotune.finalists.outcome"},
        "the export reads the finalist stage's results (finalists.outcome) as data, not how the stage decides or runs",
    ),
}


def unit(module: str) -> str | None:
    """The graph's node for a module: ``serve_app``, ``autotune.<subpackage or module>``, a subpackage's CLI
    ``autotune.<subpackage>.__main__`` (an entry above its own package: ``python -m autotune.verify``), or None (not
    ours)."""
    parts = module.split(".")
    if parts[0] == "serve_app":
        return "serve_app"
    if parts[0] != "autotune" or len(parts) == 1:
        return None
    if len(parts) == 3 and parts[2] == "__main__":
        return module
    return f"autotune.{parts[1]}"


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from autotune import slots`` imports the module autotune.trial.slots; ``from autotune import __version__``
            # only the package
            out += [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "autotune"]
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    for package in ("autotune", "serve_app"):
        for path in sorted((root / package).rglob("*.py")):
            src = unit(module_name(path, root))
            if src is None:
                continue
            graph[src]
            for name in imported(ast.parse(path.read_text(), filename=str(path))):
                dst = unit(name)
                if dst is not None and dst != src and exists(root, dst):
                    graph[src].add(dst)
    return dict(graph)


def module_imports(root: Path = ROOT) -> dict[str, set[str]]:
    """Every autotune module and the autotune modules it imports (``from a import b``: ``a``, and ``a.b`` where that is
    a module)."""
    out: dict[str, set[str]] = {}
    for path in sorted((root / "autotune").rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names if exists(root, f"{node.module}.{a.name}")}
        out[module_name(path, root)] = {n for n in names if n.startswith("autotune.")}
    return out


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def forbidden_module_edges(modules: dict[str, set[str]]) -> list[str]:
    return [
        f"{src} -> {dst}: {why}"
        for (a, b), why in FORBIDDEN_MODULES.items()
        for src, dsts in sorted(modules.items())
        if under(src, a)
        for dst in sorted(dsts)
        if under(dst, b)
    ]


def exists(root: Path, node: str) -> bool:
    """Whether a node names a package or module (``from autotune import __version__`` names neither)."""
    path = root / Path(*node.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one node (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def forbidden_edges(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for (src, dst), why in FORBIDDEN.items():
        for target in sorted(graph.get(src, ())):
            if dst == "*" and target in LEAVES_ALLOWED or dst not in ("*", target):
                continue
            found.append(f"{src} -> {target}: {why}")
    return found


def module_violations(modules: dict[str, set[str]]) -> list[str]:
    """Imports of a package's modules that ``ONLY_MODULES`` does not allow."""
    found = []
    for (src, dst), (allowed, why) in ONLY_MODULES.items():
        for module, names in sorted(modules.items()):
            if unit(module) != src:
                continue
            found += [
                f"{module} -> {name}: {why}"
                for name in sorted(names)
                if unit(name) == dst and not any(name == a or name.startswith(a + ".") for a in allowed)
            ]
    return found


def documented_layers(path: Path = ROOT / "docs" / "architecture.md") -> dict[str, int]:
    """``autotune.<unit>`` -> its layer, from the table under "How the code is laid out" in docs/architecture.md."""
    text = path.read_text()
    section = text[text.index("## How the code is laid out") :]
    layers: dict[str, int] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0][:1].isdigit():
            for name in re.findall(r"`([\w.]+)`", cells[1]):
                layers[f"autotune.{name}"] = int(cells[0].split()[0])
    return layers


def layer_violations(graph: dict[str, set[str]], layers: dict[str, int]) -> list[str]:
    """Units the table misses or names wrongly, and imports that reach a higher layer than the importer's."""
    units = {u for u in graph if u.startswith("autotune.")}
    out = [f"{u}: not in the table of docs/architecture.md" for u in sorted(units - set(layers))]
    out += [f"{u}: in the table, not in the code" for u in sorted(set(layers) - units)]
    for src in sorted(units & set(layers)):
        out += [
            f"{src} (layer {layers[src]}) imports {dst} (layer {layers[dst]})"
            for dst in sorted(graph[src])
            if dst in layers and layers[dst] > layers[src]
        ]
    return out


def test_the_documented_layers_match_the_code() -> None:
    layers = documented_layers()
    assert len(set(layers.values())) >= 5
    assert layer_violations(import_graph(), layers) == []


def test_the_layer_check_reports_an_upward_import() -> None:
    graph = {"autotune.core": {"autotune.study"}, "autotune.study": set(), "autotune.extra": set()}
    found = layer_violations(graph, {"autotune.core": 0, "autotune.study": 7})
    assert found == [
        "autotune.extra: not in the table of docs/architecture.md",
        "autotune.core (layer 0) imports autotune.study (layer 7)",
    ]


def test_the_graph_sees_the_packages() -> None:
    graph = import_graph()
    assert {"autotune.space", "autotune.engines", "autotune.serve", "autotune.study", "serve_app"} <= set(graph)
    assert graph["serve_app"] == {"autotune.serve"}, "serve_app is an import shim, nothing more"
    assert "autotune.serve" in graph["autotune.study"]  # the runner's lazy import inside a function counts
    assert "autotune.report" in graph["autotune.verify.__main__"]  # a package's CLI is a unit of its own
    assert "autotune.report" not in graph["autotune.verify"]


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_no_forbidden_edges() -> None:
    assert forbidden_edges(import_graph()) == []


def test_the_export_imports_only_the_finalists_outcome() -> None:
    modules = module_imports()
    assert module_violations(modules) == []
    assert any("autotune.finalists.outcome" in names for m, names in modules.items() if m.startswith("autotune.export"))
    broken = {"autotune.export.x": {"autotune.finalists.choice", "autotune.finalists.outcome"}}
    assert module_violations(broken) == [
        f"autotune.export.x -> autotune.finalists.choice: {ONLY_MODULES[next(iter(ONLY_MODULES))][1]}"
    ]


def test_no_forbidden_module_edges() -> None:
    assert forbidden_module_edges(module_imports()) == []


def test_the_policy_imports_of_the_engines_only_the_contract_and_the_registry() -> None:
    allowed = {"autotune.engines", "autotune.engines.base", "autotune.engines.memory"}
    found = {dst for src, dsts in module_imports().items() if under(src, "autotune.policy") for dst in dsts} & {
        m for m in module_imports() if under(m, "autotune.engines")
    }
    assert found <= allowed, sorted(found - allowed)


def test_nothing_in_autotune_imports_serve_app() -> None:
    graph = import_graph()
    assert [src for src, dsts in graph.items() if "serve_app" in dsts] == []


@pytest.mark.parametrize(
    ("edges", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": set()}, []),
    ],
)
def test_the_cycle_check_finds_a_cycle(edges: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(edges) == expected


def test_the_checks_fail_on_a_broken_copy(tmp_path: Path) -> None:
    """A copy of the tree with space importing engines, a bench <-> core cycle, export importing policy, policy
    importing SGLang's rules, the runner the simulator's profiles and trial the simulator, is reported."""
    import shutil

    for package in ("autotune", "serve_app"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "autotune" / "space" / "broken.py").write_text("from autotune.engines import get_engine\n")
    with (tmp_path / "autotune" / "core" / "errors.py").open("a") as f:
        f.write("\nfrom autotune.bench.types import BenchPlan  # noqa\n")
    (tmp_path / "autotune" / "export" / "broken.py").write_text("import autotune.policy.fit\n")
    (tmp_path / "autotune" / "policy" / "broken.py").write_text("from autotune.engines.sglang_rules import normalize\n")
    with (tmp_path / "autotune" / "study" / "runner.py").open("a") as f:
        f.write("\nfrom autotune.sim.profile import load_profile  # noqa\n")
    (tmp_path / "autotune" / "trial" / "broken.py").write_text("import autotune.sim.server\n")
    module_found = forbidden_module_edges(module_imports(tmp_path))
    assert "autotune.policy.broken -> autotune.engines.sglang_rules" in " ".join(module_found)
    assert "autotune.study.runner -> autotune.sim.profile" in " ".join(module_found)
    graph = import_graph(tmp_path)
    found = forbidden_edges(graph)
    assert any("autotune.space -> autotune.engines" in e for e in found)
    assert any("autotune.export -> autotune.policy" in e for e in found)
    assert any("autotune.trial -> autotune.sim" in e for e in found)
    assert any("autotune.core -> autotune.bench" in e for e in found)
    assert any({"autotune.bench", "autotune.core"} <= set(c) for c in cycles(graph))


if __name__ == "__main__":
    for src, dsts in sorted(import_graph().items()):
        print(f"{src:28} -> {', '.join(sorted(dsts)) or '-'}")
