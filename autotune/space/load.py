"""``load_study``: a study YAML file (plus command-line overrides) -> a validated, frozen ``StudySpec``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.bench.load import Load
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.errors import SpaceError
from autotune.space.checks import check_file, resolve_workload_path, study_slo
from autotune.space.params import as_launched, build_params, check_points
from autotune.space.schema import Problem, StudyFileModel, parse_file_model, raise_problems, read_yaml
from autotune.space.types import (
    METRIC_NAMES,
    Constraint,
    Objective,
    StudyOverrides,
    StudySpec,
    default_direction,
)

DEFAULT_OBJECTIVE = ("output_tok_per_s", "max")
DEFAULT_CONSTRAINTS = (("ttft_ms.p99", 2000.0), ("itl_ms.p99", 100.0))  # (metric, max) at the objective's level

# StudyOverrides field -> where it goes in the file.
_OVERRIDE_KEYS: dict[str, tuple[str, str]] = {
    "name": ("study", "name"),
    "trials": ("study", "trials"),
    "engine": ("study", "engine"),
    "seed": ("study", "seed"),
    "sim_profile": ("sim", "profile"),
    "time_scale": ("sim", "time_scale"),
    "model_path": ("server", "model_path"),
    "tp_size": ("server", "tp_size"),
}


def load_study(path: str | Path, *, overrides: StudyOverrides | None = None) -> StudySpec:
    """Read, validate and type a study file. Raises ``SpaceError`` naming the file, each bad key and its fix."""
    source = Path(path)
    raw = read_yaml(source)
    from_cli = _apply_overrides(raw, overrides)
    try:
        model = parse_file_model(raw, source)
    except SpaceError as exc:
        raise SpaceError(_mark_cli(str(exc), from_cli)) from None
    problems = check_file(model, source)
    params, param_problems = build_params(
        model.params,
        fixed_flags=model.server.flags,
        fixed_env=model.server.env,
        properties=model.workload.properties,
    )
    problems += param_problems
    points, points_key = _points(model)
    if model.points_to_evaluate and model.study.points_to_evaluate:
        problems.append(
            Problem("points_to_evaluate", "points are given both here and under study", "keep one list, under study")
        )
    elif not param_problems:
        problems += check_points(points, params, key=points_key)
    if model.study.baseline is not None and not param_problems:
        problems += [
            Problem(pr.key.replace("study.baseline[0]", "study.baseline"), pr.message, pr.fix)
            for pr in check_points([model.study.baseline], params, key="study.baseline")
        ]
    if problems:
        try:
            raise_problems(source, problems)
        except SpaceError as exc:
            raise SpaceError(_mark_cli(str(exc), from_cli)) from None
    return _to_spec(model, source, params)


def _points(m: StudyFileModel) -> tuple[list[dict[str, Any]], str]:
    """``study.points_to_evaluate``, or the top-level ``points_to_evaluate`` (also accepted), with its key."""
    if m.points_to_evaluate is not None and not m.study.points_to_evaluate:
        return list(m.points_to_evaluate), "points_to_evaluate"
    return list(m.study.points_to_evaluate), "study.points_to_evaluate"


def _apply_overrides(raw: dict[str, Any], overrides: StudyOverrides | None) -> set[str]:
    """Write the command-line values into the raw file data; return the key paths they set."""
    if overrides is None:
        return set()
    done: set[str] = set()
    for field, (section, key) in _OVERRIDE_KEYS.items():
        value = getattr(overrides, field)
        if value is None:
            continue
        if section == "sim" and "sim" not in raw and _engine(raw, overrides) != "sim":
            continue  # a sim option on the command line does not apply to a real-engine study
        part = raw.setdefault(section, {})
        if part is None:
            part = raw[section] = {}
        if isinstance(part, dict):
            part[key] = value
            done.add(f"{section}.{key}")
    return done


def _engine(raw: dict[str, Any], overrides: StudyOverrides) -> Any:
    if overrides.engine is not None:
        return overrides.engine
    study = raw.get("study")
    return study.get("engine", "sim") if isinstance(study, dict) else "sim"


def _mark_cli(message: str, from_cli: set[str]) -> str:
    """Say which bad values came from the command line rather than the file."""
    for key in from_cli:
        message = message.replace(f"{key}: ", f"{key} (given on the command line): ")
    return message


def _to_spec(m: StudyFileModel, source: Path, params: tuple[Any, ...]) -> StudySpec:
    s = m.study
    if s.objectives:
        objectives = tuple(
            Objective(o.metric, o.level, o.direction or default_direction(o.metric)) for o in s.objectives
        )
    else:
        metric, level = DEFAULT_OBJECTIVE
        objectives = (Objective(metric, level, default_direction(metric)),)
    obj_level = objectives[0].level
    if s.constraints is None:
        constraints = tuple(Constraint(metric, obj_level, max=limit) for metric, limit in DEFAULT_CONSTRAINTS)
    else:
        constraints = tuple(
            Constraint(
                c.metric,
                obj_level if c.level is None else c.level,
                max=None if c.max is None else float(c.max),
                min=None if c.min is None else float(c.min),
            )
            for c in s.constraints
        )
    sim = m.sim if s.engine == "sim" else None
    model_path = (m.server.model_path or "").strip() or (sim.profile if sim else "")
    server = m.server.model_copy(  # the file's section, its names normalized
        update={
            "model_path": model_path,
            "host": m.server.host.strip(),
            "secret_flags": [f.strip().lstrip("-") for f in m.server.secret_flags],
            "study_only": {k.strip().lstrip("-"): v.strip() for k, v in m.server.study_only.items()},
        }
    )
    w = m.workload
    wpath = resolve_workload_path(m, source)
    text_kind = w.kind not in ("synthetic", "random-ids", "trace")  # token-id kinds need no tokenizer
    tokenizer = (w.tokenizer or (m.server.model_path if s.engine == "sglang" else None)) if text_kind else None
    # the file's workload section is the benchmark's WorkloadSpec field for field, but for its resolved path and
    # tokenizer (and the properties, which go to the server's environment)
    workload = WorkloadSpec(
        **w.model_dump(exclude={"properties", "path", "tokenizer"}),
        path=str(wpath) if wpath is not None else None,
        tokenizer=tokenizer,
    )
    open_loop = any(not isinstance(lv, int) for lv in m.load_levels)
    loads = tuple(Load.closed(lv) if isinstance(lv, int) else lv for lv in m.load_levels) if open_loop else ()
    # the bench section is the BenchPlan's settings field for field (``max_level_s`` is its ``max_level_wall_s``)
    plan = BenchPlan(
        **m.bench.model_dump(exclude={"max_level_s"}),
        max_level_wall_s=m.bench.max_level_s,
        workload=workload,
        concurrencies=tuple(lv for lv in m.load_levels if isinstance(lv, int)),
        loads=loads,
        slo=study_slo(m),
        precision_metric=_precision_metric(objectives[0].metric),
    )
    return StudySpec(
        name=s.name or source.stem,
        engine=s.engine,
        trials=s.trials,
        sampler=s.sampler,
        seed=s.seed,
        max_concurrent=s.max_concurrent,
        objectives=objectives,
        constraints=constraints,
        ready_timeout_s=float(s.ready_timeout_s),
        server=server,
        sim=sim,
        workload=workload,
        workload_properties=dict(w.properties),
        plan=plan,
        params=params,
        points_to_evaluate=tuple(as_launched(p, params) for p in _points(m)[0]),
        source=source.resolve(),
        baseline_point=as_launched(s.baseline, params) if s.baseline is not None else None,
        export_http=(m.export.http_host, m.export.http_port),
        finalists=s.finalists,
        stop_when=s.stop_when,
        cpu_isolation=s.cpu_isolation,
        speculative_caps=s.speculative_caps,
    )


def _precision_metric(metric: str) -> str:
    """The figure whose interval decides how many windows a level gets: the primary objective's metric when it is a
    per-window figure, else output throughput."""
    return metric if metric in METRIC_NAMES else "output_tok_per_s"
