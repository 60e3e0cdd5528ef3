"""Which engine produced the numbers, said in one line. Simulated figures are never presented as measurements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autotune.export.study_only import SIMULATED_ACCEPTANCE_ENV, simulated_acceptance
from autotune.trial.records import EngineInfo, TrialRecord

_ENGINE_NAMES = {"sglang": "SGLang", "sim": "simulated SGLang"}


def engine_banner(engine: EngineInfo | None, env: Mapping[str, str] | None = None) -> str:
    """One line naming the engine: the real release and GPUs, or the simulator's profile. ``env``: the trial's
    variables; with simulated acceptance the figures are not called plainly measured."""
    line = _engine_line(engine)
    acc = simulated_acceptance(env or {})
    if acc is not None and engine is not None and not engine.simulated:
        line = line.removesuffix(" (measured)") + (
            f" (measured with SIMULATED speculative acceptance, {SIMULATED_ACCEPTANCE_ENV}={acc}: the accept length "
            "was drawn, not a real drafter's; speculative figures assume it)"
        )
    return line


def _engine_line(engine: EngineInfo | None) -> str:
    if engine is None:
        return "Engine: unknown (no engine information recorded; treat these figures with suspicion)"
    if engine.simulated:
        profile = engine.profile or "unnamed"
        details = [f"simulated hardware {engine.gpu_count} x {engine.gpu_name}", f"autotune {engine.version} simulator"]
        if engine.time_scale is not None:
            details.append(f"time scale {engine.time_scale:g}x, figures in simulated time")
        return f"Engine: SIMULATED (profile {profile}), not a measurement ({'; '.join(details)})"
    name = _ENGINE_NAMES.get(engine.engine, engine.engine)
    where = f" on node {engine.node}" if engine.node else ""
    return f"Engine: {name} {engine.version} on {engine.gpu_count} x {engine.gpu_name}{where} (measured)"


def study_engines(records: Sequence[TrialRecord]) -> tuple[EngineInfo, ...]:
    """Distinct engines seen in a study, by engine/version/hardware/profile (node differences ignored)."""
    seen: dict[tuple[object, ...], EngineInfo] = {}
    for rec in records:
        e = rec.engine
        if e is None:
            continue
        key = (e.engine, e.version, e.simulated, e.gpu_name, e.gpu_count, e.profile, e.time_scale)
        seen.setdefault(key, e)
    return tuple(seen.values())


def study_banner(records: Sequence[TrialRecord]) -> str:
    """The banner for a whole study; warns when trials came from different engines."""
    engines = study_engines(records)
    env = next((r.env for r in records if simulated_acceptance(r.env) is not None), None)
    if not engines:
        return engine_banner(None)
    if len(engines) == 1:
        return engine_banner(engines[0], env)
    lines = "; ".join(engine_banner(e, env).removeprefix("Engine: ") for e in engines)
    return f"Engines: MIXED, do not compare across them: {lines}"


def is_simulated(records: Sequence[TrialRecord]) -> bool:
    return any(e.simulated for e in study_engines(records))
