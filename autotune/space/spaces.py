"""The search spaces shipped with autotune (package data ``autotune/search_spaces/*.yaml``; the repository's
``search_spaces/`` folder points there), and how ``--space`` finds a file: a path that exists, else a shipped space
by name (``smoke``, ``smoke.yaml`` or ``search_spaces/smoke.yaml``), from any working directory."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from autotune.core.errors import AutotuneError


def _folder() -> Path:
    return Path(str(resources.files("autotune") / "search_spaces"))


def packaged_space_names() -> list[str]:
    folder = _folder()
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def resolve_space(value: str | Path) -> Path:
    """The study file ``value`` names. Raises AutotuneError naming the shipped spaces when there is none."""
    path = Path(value).expanduser()
    if path.exists():
        return path
    name = path.name.removesuffix(".yaml").removesuffix(".yml")
    if path.parent in (Path("."), Path("search_spaces")) or str(path.parent).endswith("search_spaces"):
        shipped = _folder() / f"{name}.yaml"
        if shipped.exists():
            return shipped
    raise AutotuneError(
        f"study file {value} not found (looked in {Path.cwd()}); pass a path to a YAML study file, or the name of a "
        f"search space shipped with autotune: {', '.join(packaged_space_names()) or 'none found'}"
    )
