"""``--validate-only``'s engine checks, before anything launches: every flag a study passes is one the engine knows, and
a simulated study names a simulator profile that exists.

The simulator's flags come from its own argument parser (in process); SGLang's from the installed release's ``--help``
(cached like the worker's preflight, ``autotune.engines.preflight``) where SGLang is installed here. Where it is not,
the check says so: the flags are then checked on each worker before its launch.
"""

from __future__ import annotations

import difflib
import importlib.util
import sys
from dataclasses import dataclass

from autotune.engines.base import flags_in_help
from autotune.space import StudySpec


@dataclass(frozen=True)
class FlagCheck:
    problems: tuple[str, ...]  # one line each: what is wrong and how to fix it
    note: str  # what was checked against


def study_flags(spec: StudySpec) -> dict[str, str]:
    """Every flag name the study passes (without dashes) -> where it is set."""
    out = {name: "server.flags" for name in spec.server.flags}
    for p in spec.params:
        if p.flag:
            out.setdefault(p.flag, f"params.{p.name}")
    return out


def _unknown(spec: StudySpec, known: frozenset[str], aliases: tuple[tuple[str, str], ...], engine: str) -> list[str]:
    out = []
    for flag, where in study_flags(spec).items():
        if flag in known or any(old == flag and new in known for old, new in aliases):
            continue
        close = difflib.get_close_matches(flag, sorted(known), n=2)
        hint = f" (did you mean {', '.join('--' + c for c in close)}?)" if close else ""
        out.append(f"{where}: --{flag} is not a flag of {engine}{hint}; fix the name or remove it")
    return out


def _too_few_gpus(spec: StudySpec, profile: str) -> list[str]:
    """A server wider than the profile's node fails every launch as SGLang would (``invalid device ordinal``)."""
    from autotune.sim.profile import list_profiles, profile_gpus

    per_node, nodes = profile_gpus(profile), spec.server.nnodes
    if per_node is None or spec.gpus_per_trial <= per_node * nodes:
        return []
    counts = ", ".join(f"{name}: {profile_gpus(name)}" for name in list_profiles())
    return [
        f"server.tp_size: each server needs {spec.gpus_per_trial} GPU(s) (tp_size x dp-size) over {nodes} node(s), "
        f"but simulator profile {profile!r} has {per_node} a node, so every launch would fail; lower server.tp_size, "
        f"raise server.nnodes or pick a profile with more GPUs ({counts})"
    ]


def check_engine_flags(spec: StudySpec) -> FlagCheck:
    if spec.engine == "sim":
        from autotune.sim.args import build_parser
        from autotune.sim.profile import list_profiles

        problems: list[str] = []
        profile = spec.sim.profile if spec.sim is not None else None
        if profile is not None and profile not in list_profiles() and not profile.endswith((".yaml", ".yml")):
            close = difflib.get_close_matches(profile, list_profiles(), n=1)
            problems.append(
                f"sim.profile: unknown simulator profile {profile!r}; use one of "
                f"{', '.join(list_profiles())}" + (f" (did you mean {close[0]!r}?)" if close else "")
            )
        elif profile is not None:
            problems += _too_few_gpus(spec, profile)
        known = flags_in_help(build_parser().format_help())
        problems += _unknown(spec, known, (), "the simulated engine")
        return FlagCheck(tuple(problems), "flags checked against the simulator's flag list")
    if importlib.util.find_spec("sglang") is None:
        return FlagCheck((), "SGLang is not installed here: its flags are checked on each worker before its launch")
    from autotune.engines.preflight import cached_help
    from autotune.engines.sglang import SGLangEngine

    engine = SGLangEngine()
    release = engine.release()
    known = flags_in_help(cached_help(engine, sys.executable, release))
    if not known:
        return FlagCheck((), f"{release}: its --help printed no flags; flags are checked on each worker instead")
    return FlagCheck(
        tuple(_unknown(spec, known, tuple(engine.FLAG_ALIASES), release)), f"flags checked against {release} --help"
    )
