"""Before any launch: which of the study's seed points go first and which last, from what the project already knows.

- **Running cap below the load being optimised.** The engine runs at most its running cap of requests at once
  (``EngineModel.running_cap``: SGLang's ``--max-running-requests``, 48 by default with any speculative algorithm). A
  seed whose cap is below the highest load level its objectives or constraints read queues the rest of that load: a
  measurement of the cap, not of the point's other settings. Such a seed gets a twin with the cap lifted; the capped
  seed is launched last (unless it is the study's baseline, which is always measured first).
- **Predicted not to fit in GPU memory** (``autotune.policy.fit``): the weights leave no KV cache, or the memory outside
  the static pool cannot hold the CUDA graphs. Such a seed is launched last. Sizes come from the engine
  (``Engine.memory_sizes``): the simulator's profile, or for SGLang the model's ``config.json`` and the GPU memory
  ``nvidia-smi`` reports on this node.

Proposals are not screened: a screen of them (cap below the top load, predicted not to fit) was removed after it
gained nothing on the landscape families of issue #29 (``docs/decisions/0011-round-4-issue-29.md``); the repair
(``autotune.policy.repair``) gives proposals the cap and memory the top load needs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from autotune.core.errors import AutotuneError, SpaceError
from autotune.core.trial import TrialConfig
from autotune.engines import engine_for, engine_model
from autotune.engines.memory import Sizes
from autotune.policy import fit
from autotune.space import StudySpec, to_trial_config
from autotune.space.types import ParamSpec


def top_level(spec: StudySpec) -> int | None:
    """The highest concurrency any objective or constraint reads, or None when none reads a load level."""
    levels = spec.plan.concurrencies
    if not levels:
        return None
    read = [o.level for o in spec.objectives] + [c.level for c in spec.constraints]
    nums = [max(levels) if lv == "max" else int(lv) for lv in read if lv == "max" or str(lv).isdigit()]
    return max(nums) if nums else None


def launched_config(spec: StudySpec, point: Mapping[str, Any]) -> TrialConfig:
    """The point's flags and environment as its trial launches them, before the engine's own normalization: with
    ``speculative_caps: tie`` a speculative point's running cap and CUDA-graph ceiling are set together
    (``EngineModel.tie_caps``; the ceiling defaults to the study's highest load level). Raises ``SpaceError``."""
    cfg = to_trial_config(spec, point)
    if spec.speculative_caps != "tie":
        return cfg
    return replace(cfg, flags=engine_model(spec.engine).tie_caps(cfg.flags, max(spec.plan.concurrencies)))


def study_sizes(spec: StudySpec) -> Sizes | None:
    """The sizes ``autotune.policy.fit`` needs for this study (``Engine.memory_sizes``), or None (with a note on
    stderr) when they are unknown."""
    try:
        engine = engine_for(spec)
        drafters = tuple(str(c) for p in spec.params if p.flag == engine.model.drafter_flag for c in p.choices if c)
        return engine.memory_sizes(spec.server.model_path, drafters)
    except (AutotuneError, OSError, ValueError, KeyError) as exc:
        print(f"note: no GPU-memory prediction for study {spec.name!r}: {exc}", file=sys.stderr)
        return None


def _cap_param(spec: StudySpec) -> ParamSpec | None:
    """The study's unconditional running-cap parameter (``EngineModel.running_cap_flag``), if it searches one."""
    flag = engine_model(spec.engine).running_cap_flag
    return next((p for p in spec.params if p.flag == flag and not p.when), None)


def cap_lifts(param: ParamSpec, top: int) -> list[Any]:
    """The values of the running-cap parameter that reach ``top``, smallest first: a categorical's integer choices, or
    an integer's smallest value at or above ``top`` (on its ``step`` grid from ``low``); empty when none does."""
    if param.type == "categorical":
        return sorted(c for c in param.choices if isinstance(c, int) and not isinstance(c, bool) and c >= top)
    if param.type != "int" or param.low is None or param.high is None:
        return []
    low, step = int(param.low), int(param.step or 1)
    value = low + max(0, -(-(top - low) // step)) * step
    return [value] if value <= param.high else []


def _capped_below(spec: StudySpec, point: dict[str, Any], top: int) -> bool | None:
    """Whether ``point``'s running cap is below ``top`` requests at once; None when it is not a valid point."""
    try:
        cap = engine_model(spec.engine).running_cap(launched_config(spec, point).flags)
    except SpaceError:
        return None
    return cap is not None and cap < top


def _lifts_already(spec: StudySpec, point: dict[str, Any], other: dict[str, Any], name: str, top: int) -> bool:
    """Whether ``other`` is ``point`` with its cap already at or above ``top``."""
    if {k: v for k, v in other.items() if k != name} != {k: v for k, v in point.items() if k != name}:
        return False
    return _capped_below(spec, other, top) is False


def uncapped_seeds(spec: StudySpec) -> list[dict[str, Any]]:
    """For each of the study's ``points_to_evaluate`` whose running cap is below the top load level, the same point with
    the cap lifted to the top load (the smallest value of the study's running-cap parameter that
    reaches it): the user's own launch, without the cap the screen would otherwise hold against the search."""
    top = top_level(spec)
    param = _cap_param(spec)
    if top is None or param is None:
        return []
    lifts = cap_lifts(param, top)
    if not lifts:
        return []
    out: list[dict[str, Any]] = []
    known = [dict(p) for p in spec.points_to_evaluate]
    for point in spec.points_to_evaluate:
        if not _capped_below(spec, dict(point), top):
            continue
        lifted = {**point, param.name: lifts[0]}
        if lifted in known or lifted in out or any(_lifts_already(spec, point, k, param.name, top) for k in known):
            continue
        out.append(lifted)
    return out


def capped_seeds(spec: StudySpec) -> list[dict[str, Any]]:
    """The study's ``points_to_evaluate`` whose running cap is below the top load level and whose lifted twin is also
    launched (another seed with the cap at or above it, or one ``uncapped_seeds`` adds). At the top load the twin runs
    the same settings without the queue, so the capped seed (usually the user's own launch with SGLang's default cap)
    teaches the search nothing the twin does not: it is still measured, as the study's baseline, but last."""
    top = top_level(spec)
    param = _cap_param(spec)
    if top is None or param is None:
        return []
    twins = [dict(p) for p in spec.points_to_evaluate] + uncapped_seeds(spec)
    out: list[dict[str, Any]] = []
    for point in map(dict, spec.points_to_evaluate):
        if (
            point not in out
            and _capped_below(spec, point, top)
            and any(t != point and _lifts_already(spec, point, t, param.name, top) for t in twins)
        ):
            out.append(point)
    return out


def predicted_oom_seeds(spec: StudySpec, sizes: Sizes | None) -> list[dict[str, Any]]:
    """The study's ``points_to_evaluate`` predicted not to fit in GPU memory (``autotune.policy.fit``)."""
    if sizes is None:
        return []
    out: list[dict[str, Any]] = []
    for point in spec.points_to_evaluate:
        try:
            cfg = launched_config(spec, dict(point))
        except SpaceError:
            continue
        if not fit.predict(sizes, cfg.flags, tp_size=cfg.tp_size, model=engine_model(spec.engine)).fits:
            out.append(dict(point))
    return out


def deferred_seeds(spec: StudySpec, sizes: Sizes | None) -> list[dict[str, Any]]:
    """The seed points launched last, when only as many launches of the budget remain (or when the stopping rule ends
    the search), so the search does not wait behind them: capped seeds whose lifted twin is launched (the baseline,
    first), then seeds predicted not to fit in GPU memory. The study's baseline (``StudySpec.baseline``, the user's
    current configuration) is never among them: it is measured first, whatever these rules say of it."""
    out = capped_seeds(spec)
    out += [p for p in predicted_oom_seeds(spec, sizes) if p not in out]
    return [p for p in out if p != spec.baseline]


def seeds_now(spec: StudySpec, sizes: Sizes | None) -> list[dict[str, Any]]:
    """The seed points enqueued when the study opens, in order: the study's ``points_to_evaluate`` and the lifted caps
    ``uncapped_seeds`` adds, a deferred capped seed replaced in its place by its lifted twin; ``deferred_seeds`` are
    left out (the searcher launches them last). The study's baseline comes first, always (the user's configuration is
    what every other result is judged against, so a time box or the budget never leaves it out)."""
    later = deferred_seeds(spec, sizes)
    base = spec.baseline
    first = [base] if base is not None else []
    lifted = uncapped_seeds(spec)
    top, param = top_level(spec), _cap_param(spec)
    out: list[dict[str, Any]] = list(first)  # a capped baseline's lifted twin follows it
    for point in map(dict, spec.points_to_evaluate):
        if point == base and top is not None and param is not None:
            place = [point, *(t for t in lifted if _lifts_already(spec, point, t, param.name, top))]
        elif point not in later:
            place = [point]
        elif top is not None and param is not None:
            place = [t for t in lifted if _lifts_already(spec, point, t, param.name, top)]
        else:
            place = []
        out += [p for p in place if p not in out]
    return out + [t for t in lifted if t not in out and t not in later]
