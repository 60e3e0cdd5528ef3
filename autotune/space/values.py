"""Parameter values: equality that keeps True apart from 1, membership in a parameter's domain, conditions, and a
point's identity."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autotune.space.types import Condition, ParamSpec, Scalar


def params_key(params: Mapping[str, Any]) -> str:
    """A point's identity: its parameters as canonical JSON."""
    return json.dumps(params, sort_keys=True, default=str)


def same_value(a: Any, b: Any) -> bool:
    """``a == b`` without Python's ``True == 1`` (a bool only equals a bool)."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def condition_holds(cond: Condition, values: Mapping[str, Any]) -> bool:
    """True when ``cond.param`` was sampled and its value passes the condition; an absent parameter fails it."""
    if cond.param not in values:
        return False
    v = values[cond.param]
    if cond.values is not None:
        return any(same_value(v, c) for c in cond.values)
    for op, ref in cond.ops:
        if op == "eq":
            ok = same_value(v, ref)
        elif op == "ne":
            ok = not same_value(v, ref)
        elif not (is_number(v) and is_number(ref)):
            ok = False
        elif op == "gt":
            ok = v > ref
        elif op == "ge":
            ok = v >= ref
        elif op == "lt":
            ok = v < ref
        else:
            ok = v <= ref
        if not ok:
            return False
    return True


def is_active(param: ParamSpec, values: Mapping[str, Any]) -> bool:
    """Whether ``param`` is sampled, given the values of the parameters before it."""
    return all(condition_holds(c, values) for c in param.when)


def accepts(param: ParamSpec, value: Any) -> bool:
    """Whether ``value`` is one the parameter can take."""
    if param.type == "categorical":
        return any(same_value(value, c) for c in param.choices)
    if param.type == "bool":
        return isinstance(value, bool)
    if not is_number(value) or (param.type == "int" and not isinstance(value, int)):
        return False
    assert param.low is not None and param.high is not None  # set by build_params for numeric types
    if not param.low <= value <= param.high:
        return False
    if param.step is None:
        return True
    k = (value - param.low) / param.step
    return abs(k - round(k)) < 1e-9


DEFAULT_SIGNIFICANT_DIGITS = 4


def decimals(param: ParamSpec) -> int | None:
    """Decimal places a float parameter's values keep: ``round``, else those of its grid ``low + k * step`` (the
    step's, or ``low``'s where it has more: low 0.05, step 0.1 keeps 0.15); None: 4 significant digits."""
    if param.round is not None:
        return param.round
    if param.step is not None:
        return grid_decimals(param.low or 0, param.step)
    return None


def grid_decimals(low: float, step: float) -> int:
    """Decimal places the points ``low + k * step`` need: the step's, or ``low``'s where it has more."""
    return max(_places(step), _places(low))


def _places(x: float) -> int:
    text = f"{x:.12f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def rounded(param: ParamSpec, value: float) -> float:
    """A sampled float at the precision it was searched (kept inside [low, high]): the value launched, recorded and
    exported, so a 16-digit draw such as 0.8284514915829985 runs and is written as 0.83 (step 0.01)."""
    places = decimals(param)
    out = round(value, places) if places is not None else float(f"{value:.{DEFAULT_SIGNIFICANT_DIGITS}g}")
    assert param.low is not None and param.high is not None  # set by build_params for numeric types
    return float(min(max(out, param.low), param.high))


def describe(param: ParamSpec) -> str:
    if param.type in ("categorical", "bool"):
        return f"choices {list(param.choices)!r}"
    step = f" step {param.step}" if param.step is not None else ""
    what = "integers" if param.type == "int" else "numbers"
    return f"{what} in [{param.low}, {param.high}]{step}"


def numeric_param(param: ParamSpec) -> bool:
    return param.type in ("int", "float") or (param.type == "categorical" and any(is_number(c) for c in param.choices))


def env_str(value: Scalar) -> str:
    """How a sampled value is written into an environment variable (True -> "1"; None and False are never written)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
