"""From a study to trial configurations: define-by-run sampling and merging fixed and sampled settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotune.core.errors import SpaceError
from autotune.core.trial import TrialConfig
from autotune.space.schema import did_you_mean
from autotune.space.types import StudySpec
from autotune.space.values import accepts, describe, env_str, is_active, rounded

if TYPE_CHECKING:
    import optuna


def suggest(spec: StudySpec, trial: optuna.Trial) -> dict[str, Any]:
    """Sample the study's parameters in file order; a parameter whose ``when`` fails is skipped (absent)."""
    values: dict[str, Any] = {}
    for p in spec.params:
        if not is_active(p, values):
            continue
        if p.type == "int":
            assert p.low is not None and p.high is not None
            values[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high), step=int(p.step or 1), log=p.log)
        elif p.type == "float":
            assert p.low is not None and p.high is not None
            # The sampler's draw, at the precision searched: the server runs (and the record keeps) the rounded value.
            draw = trial.suggest_float(p.name, float(p.low), float(p.high), step=p.step, log=p.log)
            values[p.name] = rounded(p, draw)
        else:
            values[p.name] = trial.suggest_categorical(p.name, list(p.choices))
    return values


def to_trial_config(spec: StudySpec, values: Mapping[str, Any]) -> TrialConfig:
    """Merge fixed server flags/env, workload properties (as env) and the sampled values.

    ``None`` and ``False`` omit a flag or leave a variable unset; ``True`` is a bare switch (``"1"`` in env);
    env values are strings. A value for a parameter whose condition fails is ignored, as the sampler would.
    Raises ``SpaceError`` for an unknown parameter name or a value the parameter cannot take. The engine then applies
    what the server would change silently (``Engine.normalize``).
    """
    names = [p.name for p in spec.params]
    for k in values:
        if k not in names:
            close = did_you_mean(k, names)
            hint = f"did you mean `{close}`?" if close else f"use names from params: {', '.join(names)}"
            raise SpaceError(f"{spec.source}: trial values name unknown parameter `{k}`. Fix: {hint}")
    flags: dict[str, Any] = dict(spec.server.flags)
    env: dict[str, str] = dict(spec.server.env)
    env.update(spec.workload_properties)
    active: dict[str, Any] = {}
    for p in spec.params:
        if p.name not in values or not is_active(p, active):
            continue
        v = values[p.name]
        if not accepts(p, v):
            raise SpaceError(
                f"{spec.source}: params.{p.name}: {v!r} is not a value it can take ({describe(p)}). "
                "Fix: use a value inside the declared range or choices"
            )
        active[p.name] = v
        if v is None or v is False:
            continue
        if p.flag is not None:
            flags[p.flag] = v
        else:
            assert p.env is not None
            env[p.env] = env_str(v)
    return TrialConfig(
        model_path=spec.server.model_path,
        tp_size=spec.server.tp_size,
        nnodes=spec.server.nnodes,
        flags={k: v for k, v in flags.items() if v is not None and v is not False},
        env=env,
        params=active,
        host=spec.server.host,
    )
