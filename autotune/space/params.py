"""Searched parameters: judging and building ``ParamSpec``s, their ``when`` conditions, and the first points to try."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotune.space.names import PARAM_NAME_RE, env_problems, flag_problems
from autotune.space.schema import ParamModel, Problem, did_you_mean
from autotune.space.types import CONDITION_OPS, Condition, ParamSpec
from autotune.space.values import (
    DEFAULT_SIGNIFICANT_DIGITS,
    accepts,
    condition_holds,
    decimals,
    describe,
    env_str,
    grid_decimals,
    is_number,
    numeric_param,
    rounded,
    same_value,
)

_ORDER_OPS = ("gt", "ge", "lt", "le")
_OP_ALIASES = {
    ">": "gt",
    ">=": "ge",
    "gte": "ge",
    "<": "lt",
    "<=": "le",
    "lte": "le",
    "==": "eq",
    "!=": "ne",
    "neq": "ne",
}


# ---------------------------------------------------------------------------------------------------------------------
# Building ParamSpecs


def _range(key: str, m: ParamModel, *, integer: bool) -> tuple[dict[str, Any], list[Problem]]:
    out: list[Problem] = []
    word = "an integer" if integer else "a number"
    for field in ("low", "high"):
        v = getattr(m, field)
        if v is None:
            out.append(Problem(f"{key}.{field}", f"type {m.type} needs `{field}`", f"add `{field}:` ({word})"))
        elif integer and not isinstance(v, int):
            out.append(Problem(f"{key}.{field}", f"type int needs {word}, got {v!r}", "write a whole number"))
    if m.choices is not None:
        out.append(
            Problem(
                f"{key}.choices", f"`choices` does not apply to type {m.type}", "remove it, or use type: categorical"
            )
        )
    if m.step is not None:
        if integer and not isinstance(m.step, int):
            out.append(
                Problem(f"{key}.step", f"type int needs an integer step, got {m.step!r}", "write a whole number")
            )
        elif m.step <= 0:
            out.append(
                Problem(f"{key}.step", f"step must be positive, got {m.step!r}", "use a step above 0, or remove it")
            )
    if m.round is not None and integer:
        out.append(Problem(f"{key}.round", "`round` applies to type float only", "remove it"))
    if out:
        return {}, out
    low, high, step = m.low, m.high, m.step
    assert low is not None and high is not None  # a missing one was a problem above, and returned
    if low >= high:
        out.append(
            Problem(
                f"{key}.low",
                f"empty range: low ({low}) must be below high ({high})",
                "make low < high (for one value, fix it under server.flags/env instead)",
            )
        )
    if m.log:
        if low <= 0:
            out.append(
                Problem(f"{key}.low", f"log scale needs low > 0, got {low}", "raise low above 0, or set log: false")
            )
        if step is not None and not (integer and step == 1):
            out.append(
                Problem(f"{key}.step", "log scale cannot be combined with a step", "remove `step` or set log: false")
            )
    if not out and step is not None:
        k = (high - low) / step
        if abs(k - round(k)) > 1e-9:
            top = low + int(k) * step
            out.append(
                Problem(
                    f"{key}.high",
                    f"high ({high}) is not on the step grid from low ({low}) by {step}",
                    f"set high to {top} or {top + step}",
                )
            )
    if not out and step is not None and m.round is not None and m.round < grid_decimals(low, step):
        places = grid_decimals(low, step)
        out.append(
            Problem(
                f"{key}.round",
                f"round: {m.round} is coarser than the step grid ({low} + k x {step} needs {places} decimal places): "
                "its draws would be rounded off the grid",
                f"set round to {places} or more, or remove it (the grid's own decimals are kept)",
            )
        )
    fields: dict[str, Any] = {"low": low, "high": high, "step": step, "log": m.log}
    if not integer:
        fields["round"] = m.round
    return fields, out


def _choices(key: str, m: ParamModel) -> tuple[dict[str, Any], list[Problem]]:
    out: list[Problem] = []
    for field in ("low", "high", "step", "round"):
        if getattr(m, field) is not None:
            out.append(Problem(f"{key}.{field}", f"`{field}` does not apply to type {m.type}", "remove it"))
    if m.log:
        out.append(Problem(f"{key}.log", f"`log` does not apply to type {m.type}", "remove it"))
    if m.type == "bool":
        if m.choices is not None:
            out.append(
                Problem(
                    f"{key}.choices",
                    "type bool takes no choices (it searches false and true)",
                    "remove `choices`, or use type: categorical",
                )
            )
        return {"choices": (False, True)}, out
    if not m.choices:
        out.append(
            Problem(
                f"{key}.choices",
                "a categorical parameter needs at least one choice",
                "list choices, e.g. [null, EAGLE3] (null = flag omitted)",
            )
        )
        return {}, out
    for i, c in enumerate(m.choices):
        if any(same_value(c, d) for d in m.choices[:i]):
            out.append(Problem(f"{key}.choices[{i}]", f"duplicate choice {c!r}", "list each choice once"))
        elif is_number(c) and any(isinstance(d, bool) and d == c for d in m.choices):
            # Optuna finds a given value among the choices with ==: a seed point's `true` is stored as the choice 1
            out.append(
                Problem(
                    f"{key}.choices[{i}]",
                    f"{c!r} and {bool(c)!r} are one value to Optuna (True == 1): a seed or resumed point of one is "
                    "stored as the other",
                    f'quote the number ("{c!r}"): a flag or variable gets the same text',
                )
            )
    return {"choices": tuple(m.choices)}, out


def _when(
    key: str, name: str, raw: Mapping[str, Any], earlier: Mapping[str, ParamSpec | None], all_names: Sequence[str]
) -> tuple[tuple[Condition, ...], list[Problem]]:
    out: list[Problem] = []
    conds: list[Condition] = []
    if not raw:
        return (), [Problem(f"{key}.when", "empty condition", "remove `when:` or name an earlier parameter")]
    for ref, cond in raw.items():
        ckey = f"{key}.when.{ref}"
        if ref == name:
            out.append(Problem(ckey, "a parameter cannot depend on itself", "name an earlier parameter"))
            continue
        if ref not in earlier:
            if ref in all_names:
                fix = f"move `{ref}` above `{name}` under params (conditions may only name EARLIER parameters, so sampling runs in file order)"
                out.append(Problem(ckey, f"`{ref}` is declared after `{name}`", fix))
            else:
                close = did_you_mean(ref, list(earlier))
                fix = (
                    f"did you mean `{close}`?"
                    if close
                    else f"name one of the parameters above: {', '.join(earlier) or '(none)'}"
                )
                out.append(Problem(ckey, f"unknown parameter `{ref}`", fix))
            continue
        target = earlier[ref]
        if isinstance(cond, list):
            if not cond:
                out.append(
                    Problem(ckey, "empty list of allowed values", f"list the values of `{ref}` that enable `{name}`")
                )
            for i, v in enumerate(cond):
                if v is not None and not isinstance(v, (str, int, float, bool)):
                    out.append(Problem(f"{ckey}[{i}]", f"expected a single value, got {v!r}", "write a scalar value"))
                elif target is not None and not accepts(target, v):
                    out.append(
                        Problem(
                            f"{ckey}[{i}]",
                            f"{v!r} is not a value `{ref}` can take ({describe(target)})",
                            "use one of its values",
                        )
                    )
            conds.append(Condition(ref, values=tuple(cond)))
        elif isinstance(cond, dict):
            if not cond:
                out.append(Problem(ckey, "empty operator mapping", "write e.g. {gt: 1}"))
            for op, v in cond.items():
                okey = f"{ckey}.{op}"
                if op not in CONDITION_OPS:
                    close = _OP_ALIASES.get(str(op).strip().lower()) or did_you_mean(str(op), CONDITION_OPS)
                    fix = f"did you mean `{close}`?" if close else f"use one of {', '.join(CONDITION_OPS)}"
                    out.append(Problem(okey, f"unknown operator `{op}`", fix))
                elif v is not None and not isinstance(v, (str, int, float, bool)):
                    out.append(Problem(okey, f"expected a single value, got {v!r}", "write a scalar value"))
                elif op in _ORDER_OPS and not is_number(v):
                    out.append(
                        Problem(
                            okey,
                            f"`{op}` compares numbers, got {v!r}",
                            "compare with a number, or use a list of values",
                        )
                    )
                elif op in _ORDER_OPS and target is not None and not numeric_param(target):
                    out.append(
                        Problem(
                            okey, f"`{ref}` is not numeric ({describe(target)})", "use a list of allowed values instead"
                        )
                    )
            conds.append(Condition(ref, ops=tuple((str(op), v) for op, v in cond.items())))
        else:
            out.append(
                Problem(
                    ckey,
                    f"expected a list of values or an operator mapping, got {cond!r}",
                    f"write [{cond!r}] or {{eq: {cond!r}}}",
                )
            )
    return tuple(conds), out


def build_params(
    models: Mapping[str, ParamModel],
    *,
    fixed_flags: Mapping[str, Any],
    fixed_env: Mapping[str, str],
    properties: Mapping[str, str],
) -> tuple[tuple[ParamSpec, ...], list[Problem]]:
    """Judge every parameter in file order and build the valid ones; return them with all problems found."""
    out: list[Problem] = []
    built: dict[str, ParamSpec | None] = {}  # None: declared but invalid (later conditions may still name it)
    targets: dict[str, str] = {}  # "--flag" / "$ENV" -> first param that sets it
    all_names = list(models)
    if not models:
        out.append(
            Problem(
                "params",
                "no parameters to search",
                "add at least one parameter under `params:` (see search_spaces/smoke.yaml)",
            )
        )
    for name, m in models.items():
        key = f"params.{name}"
        problems: list[Problem] = []
        if not PARAM_NAME_RE.match(name):
            problems.append(
                Problem(
                    key,
                    f"`{name}` is not a valid parameter name",
                    "use letters, digits, _ and -, starting with a letter",
                )
            )
        fields, p = _range(key, m, integer=m.type == "int") if m.type in ("int", "float") else _choices(key, m)
        problems += p
        if (m.flag is None) == (m.env is None):
            problems.append(
                Problem(
                    key,
                    "give exactly one of `flag:` (a server flag) or `env:` (an environment variable)",
                    "keep one of them",
                )
            )
        elif m.flag is not None:
            problems += flag_problems(f"{key}.flag", m.flag)
            if m.flag in fixed_flags:
                problems.append(
                    Problem(f"{key}.flag", f"`{m.flag}` is also fixed in server.flags", "remove it from one of the two")
                )
            if m.flag in ("dp-size", "pp-size"):
                problems.append(
                    Problem(
                        f"{key}.flag",
                        f"{m.flag} cannot be searched: GPUs per trial must be fixed for the whole study",
                        "set it under server.flags",
                    )
                )
        else:
            assert m.env is not None
            problems += env_problems(f"{key}.env", m.env, _env_values(m.type, fields))
            if m.env in fixed_env or m.env in properties:
                where = "server.env" if m.env in fixed_env else "workload.properties"
                problems.append(
                    Problem(f"{key}.env", f"`{m.env}` is also set in {where}", "remove it from one of the two")
                )
        target = f"--{m.flag}" if m.flag is not None else f"${m.env}"
        if (m.flag is None) != (m.env is None):
            if target in targets:
                problems.append(
                    Problem(
                        key,
                        f"`{target}` is already set by parameter `{targets[target]}`",
                        "give each flag or variable one parameter",
                    )
                )
            targets.setdefault(target, name)
        when: tuple[Condition, ...] = ()
        if m.when is not None:
            when, p = _when(key, name, m.when, built, all_names)
            problems += p
        out += problems
        built[name] = (
            None if problems else ParamSpec(name=name, type=m.type, flag=m.flag, env=m.env, when=when, **fields)
        )
    return tuple(p for p in built.values() if p is not None), out


def _env_values(kind: str, fields: Mapping[str, Any]) -> list[str | None]:
    """The strings an env parameter may write (None = left unset)."""
    if kind == "bool":
        return [None, "1"]
    if kind == "categorical":
        return [None if v is None or v is False else env_str(v) for v in fields.get("choices", ())]
    return [str(fields.get("low", "?")), str(fields.get("high", "?"))]


# ---------------------------------------------------------------------------------------------------------------------
# points_to_evaluate


def check_points(
    points: Sequence[Mapping[str, Any]], params: Sequence[ParamSpec], *, key: str = "study.points_to_evaluate"
) -> list[Problem]:
    """Each point names known parameters, with values they can take, and only where their conditions can hold."""
    out: list[Problem] = []
    by_name = {p.name: p for p in params}
    for i, point in enumerate(points):
        pkey = f"{key}[{i}]"
        if not point:
            out.append(Problem(pkey, "empty point", "give parameter values, or remove the point"))
        for k in point:
            if k not in by_name:
                close = did_you_mean(k, list(by_name))
                fix = f"did you mean `{close}`?" if close else f"use parameter names from params: {', '.join(by_name)}"
                out.append(Problem(f"{pkey}.{k}", f"unknown parameter `{k}`", fix))
        for p in params:
            if p.name not in point:
                continue
            v = point[p.name]
            if not accepts(p, v):
                out.append(
                    Problem(
                        f"{pkey}.{p.name}",
                        f"{v!r} is not a value `{p.name}` can take ({describe(p)})",
                        "use one of its values",
                    )
                )
            elif p.type == "float" and rounded(p, v) != v:
                # a draw is launched at the precision searched: this value would run (and be recorded) as another
                out.append(
                    Problem(
                        f"{pkey}.{p.name}",
                        f"{v!r} is finer than `{p.name}` is searched ({_precision(p)}): it would launch as "
                        f"{rounded(p, v)!r}",
                        f"write {rounded(p, v)!r}, or search `{p.name}` finer (`round:`)",
                    )
                )
            for c in p.when:
                if c.param in point and not condition_holds(c, point):
                    out.append(
                        Problem(
                            f"{pkey}.{p.name}",
                            f"`{p.name}` is not sampled here: its condition on `{c.param}` fails ({c.param} = {point[c.param]!r})",
                            f"remove `{p.name}` from this point, or change `{c.param}`",
                        )
                    )
                elif c.param not in point and not _always_holds(c, by_name.get(c.param)):
                    # the sampler draws `c.param`; where its draw fails the condition, the value given here is dropped
                    out.append(
                        Problem(
                            f"{pkey}.{p.name}",
                            f"`{p.name}` is sampled only where its condition on `{c.param}` holds, and this point "
                            f"leaves `{c.param}` to the sampler: a draw that fails it launches the point without "
                            f"`{p.name}`",
                            f"give `{c.param}` a value for which the condition holds, or remove `{p.name}` from this point",
                        )
                    )
    return out


def as_launched(point: Mapping[str, Any], params: Sequence[ParamSpec]) -> dict[str, Any]:
    """A checked seed point with each float parameter's value as the sampler returns it (``1`` -> ``1.0``), so the
    point is the same key (``params_key``) as the trial that launches it."""
    floats = {p.name: p for p in params if p.type == "float"}
    return {k: rounded(floats[k], v) if k in floats and is_number(v) else v for k, v in point.items()}


def _precision(param: ParamSpec) -> str:
    places = decimals(param)
    if places is None:
        return f"{DEFAULT_SIGNIFICANT_DIGITS} significant digits"
    return f"{places} decimal place{'s' if places != 1 else ''}"


def _always_holds(cond: Condition, param: ParamSpec | None) -> bool:
    """Whether ``cond`` holds for every value ``param`` can take (an unconditional parameter, its choices or, for order
    operators, both ends of its range)."""
    if param is None or param.when:
        return False
    if param.type in ("categorical", "bool"):
        return all(condition_holds(cond, {param.name: v}) for v in param.choices)
    if cond.values is not None or any(op not in ("gt", "ge", "lt", "le") for op, _ in cond.ops):
        return False
    return all(condition_holds(cond, {param.name: v}) for v in (param.low, param.high))
