"""Points one parameter away from a given point: the searcher's way to an unmeasured point near a good one."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from autotune.space.types import ParamSpec, StudySpec
from autotune.space.values import accepts, decimals, is_active, rounded, same_value

FLOAT_MOVE = 0.1  # a float moves by up to this share of its range


def _other_value(p: ParamSpec, current: Any, rng: random.Random) -> Any:
    """A value of ``p`` other than ``current`` (an adjacent one for numbers), or ``current`` when there is none."""
    if p.type == "categorical":
        others = [c for c in p.choices if not same_value(c, current)]
        return rng.choice(others) if others else current
    if p.type == "bool":
        return not current
    assert p.low is not None and p.high is not None
    if p.type == "int":
        step = int(p.step or 1)
        moves = [v for v in (int(current) - step, int(current) + step) if p.low <= v <= p.high]
        return rng.choice(moves) if moves else current
    span = float(p.high) - float(p.low)
    sign = rng.choice((-1, 1))
    value = _on_grid(p, float(current) + span * FLOAT_MOVE * rng.uniform(0.3, 1.0) * sign)
    places = decimals(p)
    if value == current and places is not None:  # the move was below the precision searched: one unit instead
        unit = float(p.step) if p.step else 10.0**-places
        value = _on_grid(p, float(current) + unit * sign)
        if value == current:
            value = _on_grid(p, float(current) - unit * sign)
    return value


def _on_grid(p: ParamSpec, value: float) -> float:
    assert p.low is not None and p.high is not None
    value = min(max(value, float(p.low)), float(p.high))
    if p.step:
        value = float(p.low) + round((value - float(p.low)) / float(p.step)) * float(p.step)
    return rounded(p, value)


def _can_move(p: ParamSpec) -> bool:
    if p.type == "categorical":
        return len(p.choices) > 1
    return p.type == "bool" or (p.low is not None and p.high is not None and p.low < p.high)


def random_value(p: ParamSpec, rng: random.Random) -> Any:
    if p.type == "categorical":
        return rng.choice(list(p.choices))
    if p.type == "bool":
        return rng.random() < 0.5
    assert p.low is not None and p.high is not None
    if p.type == "int":
        step = int(p.step or 1)
        return rng.randrange(int(p.low), int(p.high) + 1, step)
    return _on_grid(p, rng.uniform(float(p.low), float(p.high)))


def movable(spec: StudySpec, point: Mapping[str, Any]) -> list[str]:
    """The parameters of ``point`` that can take another value, in file order."""
    return [p.name for p in spec.params if p.name in point and _can_move(p)]


def neighbour(
    spec: StudySpec, point: Mapping[str, Any], rng: random.Random, param: str | None = None
) -> dict[str, Any] | None:
    """``point`` with one active parameter changed (``param``, else a random one); parameters that become active get a
    random value, ones that become inactive are dropped. None when that parameter (or any) cannot change."""
    names = movable(spec, point)
    if param is not None:
        names = [n for n in names if n == param]
    if not names:
        return None
    chosen = rng.choice(names)
    moved = next(p for p in spec.params if p.name == chosen)
    return _settled(spec, {**point, moved.name: _other_value(moved, point[moved.name], rng)}, rng)


def _settled(spec: StudySpec, changed: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """``changed`` with exactly the parameters its values make active: a parameter that became active gets a random
    value, one that became inactive is dropped."""
    out: dict[str, Any] = {}
    for p in spec.params:
        if not is_active(p, out):
            continue
        v = changed.get(p.name)
        out[p.name] = v if p.name in changed and accepts(p, v) else random_value(p, rng)
    return out
