"""Every point of a finite search space: how the searcher tells an exhausted space from one its sampler missed."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from autotune.space.types import ParamSpec, StudySpec
from autotune.space.values import decimals, is_active, rounded


def walk_points(spec: StudySpec, values: Callable[[ParamSpec], Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """Every point with each parameter taking ``values(param)``, in file order, inactive parameters absent (as
    ``autotune.space.suggest`` returns points)."""
    params = spec.params

    def walk(i: int, point: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if i == len(params):
            yield dict(point)
            return
        p = params[i]
        if not is_active(p, point):
            yield from walk(i + 1, point)
            return
        for v in values(p):
            point[p.name] = v
            yield from walk(i + 1, point)
            del point[p.name]

    yield from walk(0, {})


def discrete_values(p: ParamSpec) -> list[Any] | None:
    """The values ``p`` can take when they are finitely many (choices, integers, a float with a ``step`` or
    ``round``), else None."""
    if p.type == "categorical":
        return list(p.choices)
    if p.type == "bool":
        return [False, True]
    assert p.low is not None and p.high is not None
    if p.type == "int":
        return list(range(int(p.low), int(p.high) + 1, int(p.step or 1)))
    places = decimals(p)
    if places is None:
        return None
    if p.step:
        n = int(math.floor((float(p.high) - float(p.low)) / float(p.step) + 1e-9))
        return list(dict.fromkeys(rounded(p, float(p.low) + float(p.step) * k) for k in range(n + 1)))
    # ``round`` alone: draws anywhere in [low, high] rounded to the decimals, which need not hold ``low`` (low 0.05,
    # round 1: 0.1 ... 0.9, 0.3 included); a value is listed when a draw can launch as it (``rounded`` keeps it)
    unit = 10.0**-places
    grid = (rounded(p, k * unit) for k in range(math.floor(p.low / unit), math.ceil(p.high / unit) + 1))
    return [v for v in dict.fromkeys(grid) if rounded(p, v) == v]


def finite_points(spec: StudySpec, limit: int) -> list[dict[str, Any]] | None:
    """Every point of the space when it is finite and has at most ``limit`` points, else None."""
    values = {p.name: discrete_values(p) for p in spec.params}
    if any(v is None for v in values.values()):
        return None
    out: list[dict[str, Any]] = []
    for point in walk_points(spec, lambda p: values[p.name] or []):
        out.append(point)
        if len(out) > limit:
            return None
    return out


def distance(spec: StudySpec, a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far apart two points are: 1 for each parameter active in one only or with another choice, a number's
    difference as a share of its range."""
    total = 0.0
    for p in spec.params:
        x, y = a.get(p.name), b.get(p.name)
        if (p.name in a) != (p.name in b):
            total += 1.0
        elif p.name not in a or x == y:
            continue
        elif p.type in ("int", "float") and p.low is not None and p.high is not None and p.high > p.low:
            total += abs(float(x) - float(y)) / (float(p.high) - float(p.low))  # type: ignore[arg-type]  # both points hold this numeric parameter, so x and y are numbers
        else:
            total += 1.0
    return total


def nearest_first(
    spec: StudySpec, points: Sequence[dict[str, Any]], near: dict[str, Any], rng: random.Random
) -> list[dict[str, Any]]:
    """``points`` ordered by their distance from ``near``, ties in random order."""
    keyed = [(distance(spec, p, near), rng.random(), i) for i, p in enumerate(points)]
    return [points[i] for _, _, i in sorted(keyed)]
