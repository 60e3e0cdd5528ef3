"""Worker-side checks before a launch: every flag must be known to the INSTALLED engine release.

The help text of a release is cached in a file keyed by interpreter and release, so the 20-40 s ``--help`` of SGLang is
paid once per node, not once per trial.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from autotune.core.errors import EngineUnavailableError, HelpTimeoutError, UnknownFlagError
from autotune.core.trial import LaunchSpec
from autotune.engines.base import Engine, flags_in_help

# argv elements that autotune itself adds and that every engine accepts by construction.
_MODULE_FLAG = "-m"


def _cache_path(engine: Engine, python: str, release: str) -> Path:
    key = hashlib.sha1(f"{engine.name}|{python}|{release}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"autotune-help-{engine.name}-{key}.txt"


def cached_help(engine: Engine, python: str, release: str) -> str:
    if not engine.cache_help:
        return engine.help_text(python)
    path = _cache_path(engine, python, release)
    if path.exists():
        return path.read_text()
    text = engine.help_text(python)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return text


def check_argv(
    argv: Sequence[str], known: frozenset[str], aliases: Sequence[tuple[str, str]], *, release: str
) -> list[str]:
    """Return argv with release aliases applied; raise UnknownFlagError naming every flag the release does not know."""
    out: list[str] = []
    unknown: list[str] = []
    for token in argv:
        if not token.startswith("--"):
            out.append(token)
            continue
        name = token[2:].split("=", 1)[0]
        if name in known:
            out.append(token)
            continue
        renamed = next((new for old, new in aliases if old == name and new in known), None)
        if renamed is not None:
            out.append(token.replace(name, renamed, 1))
            continue
        unknown.append(name)
        out.append(token)
    if unknown:
        hints = []
        for name in unknown:
            close = difflib.get_close_matches(name, sorted(known), n=2)
            hints.append(f"--{name}" + (f" (did you mean {', '.join('--' + c for c in close)}?)" if close else ""))
        raise UnknownFlagError(
            f"the installed engine ({release}) does not know {', '.join(hints)}. Remove the flag from the study file "
            f"or install a release that has it; `--help` of the engine lists what it accepts.",
            flags=unknown,
        )
    return out


def preflight(engine: Engine, spec: LaunchSpec, *, release: str) -> LaunchSpec:
    """Check (and alias-translate) the spec's flags against the installed release. Runs on the worker."""
    python = spec.argv[0]
    known = flags_in_help(cached_help(engine, python, release))
    if not known:
        raise EngineUnavailableError(
            f"could not read the flags of {engine.name} ({release}): its --help printed no flags; check that the "
            f"engine is installed in {python}"
        )
    start = spec.argv.index(_MODULE_FLAG) + 2 if _MODULE_FLAG in spec.argv else 1
    checked = check_argv(spec.argv[start:], known, engine.FLAG_ALIASES, release=release)
    return replace(spec, argv=tuple(spec.argv[:start]) + tuple(checked))


def run_help(argv: Sequence[str], *, timeout_s: float = 300.0) -> str:
    """Run ``argv + ['--help']`` and return its stdout (argparse prints help there)."""
    try:
        proc = subprocess.run([*argv, "--help"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise HelpTimeoutError(
            f"`{' '.join(argv)} --help` did not finish in {timeout_s:.0f} s (a slow or hung import on the worker); the "
            f"flags could not be checked. Check the engine's installation on that node."
        ) from exc
    except OSError as exc:
        raise EngineUnavailableError(f"could not run `{' '.join(argv)} --help`: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise EngineUnavailableError(
            f"`{' '.join(argv)} --help` failed (exit {proc.returncode}); is the engine installed on this worker?\n{tail}"
        )
    return proc.stdout
