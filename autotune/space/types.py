"""Typed values of a study definition: what ``load_study`` returns and the driver, searcher and exporter read.

Everything here is frozen, built from a validated YAML file: dataclasses, and the file's own sections that need
nothing resolved (``SimSpec``, ``FinalistsSpec``, ``StopRule``: the pydantic models of ``autotune.space.schema``) or only
its names normalized (``ServerSpec``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.trial import server_gpus
from autotune.space.schema import FinalistsSpec, ServerSpec, SimSpec, StopRule

Scalar = str | int | float | bool | None
Level = int | str  # a concurrency, "max" / "min" (the highest / lowest concurrency) or an open-loop key ("rate8")
ParamType = Literal["int", "float", "categorical", "bool"]

# Metric names an objective or constraint may name (LevelSummary fields; latencies with a statistic).
SCALAR_METRICS: tuple[str, ...] = (
    "output_tok_per_s",
    "request_per_s",
    "input_tok_per_s",
    "accept_length",
    "goodput",
    "slo_attainment",
)
LATENCY_METRICS: tuple[str, ...] = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
LATENCY_STATS: tuple[str, ...] = ("mean", "median", "p90", "p99")
METRIC_NAMES: tuple[str, ...] = SCALAR_METRICS + tuple(f"{m}.{s}" for m in LATENCY_METRICS for s in LATENCY_STATS)

CONDITION_OPS: tuple[str, ...] = ("eq", "ne", "gt", "ge", "lt", "le")


def default_direction(metric: str) -> Literal["maximize", "minimize"]:
    """Latencies are minimized, throughputs and accept length maximized."""
    return "minimize" if metric.split(".", 1)[0] in LATENCY_METRICS else "maximize"


@dataclass(frozen=True)
class StudyOverrides:
    """Values given on the command line; each one that is not None replaces the YAML's."""

    name: str | None = None
    trials: int | None = None
    engine: str | None = None
    sim_profile: str | None = None
    time_scale: float | None = None
    model_path: str | None = None
    tp_size: int | None = None
    seed: int | None = None


def objective_key(metric: str, level: Level) -> str:
    """The key of a metric at a load level in records and reports (``output_tok_per_s@max``); the only place the
    form is written. Nothing reads it back: whoever needs the metric and the level takes the typed ``Objective`` or
    ``Constraint``."""
    return f"{metric}@{level}"


@dataclass(frozen=True)
class Objective:
    """One thing to optimize: ``metric`` measured at load level ``level`` (a concurrency, or "max"/"min")."""

    metric: str
    level: Level = "max"
    direction: Literal["maximize", "minimize"] = "maximize"

    @property
    def key(self) -> str:
        """The objective's key in records and reports, e.g. ``output_tok_per_s@max``."""
        return objective_key(self.metric, self.level)

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` beats ``b`` in this objective's direction."""
        return a > b if self.direction == "maximize" else a < b


@dataclass(frozen=True)
class Constraint:
    """An SLO: ``metric`` at ``level`` must stay within [min, max] (either bound may be None)."""

    metric: str
    level: Level = "max"
    max: float | None = None
    min: float | None = None

    @property
    def key(self) -> str:
        return objective_key(self.metric, self.level)


@dataclass(frozen=True)
class Condition:
    """``param`` must be present and either be one of ``values`` or satisfy every ``(op, value)`` in ``ops``."""

    param: str
    values: tuple[Scalar, ...] | None = None
    ops: tuple[tuple[str, Scalar], ...] = ()


@dataclass(frozen=True)
class ParamSpec:
    """One searched parameter. Exactly one of ``flag`` (server flag, no dashes) and ``env`` (variable name) is set.

    ``choices`` holds the categorical choices; a bool parameter has ``(False, True)``.
    ``when`` lists conditions that must all hold for the parameter to be sampled (define-by-run, in file order).
    """

    name: str
    type: ParamType
    flag: str | None = None
    env: str | None = None
    low: int | float | None = None
    high: int | float | None = None
    step: int | float | None = None
    log: bool = False
    choices: tuple[Scalar, ...] = ()
    when: tuple[Condition, ...] = ()
    round: int | None = None  # float: decimal places kept (``autotune.space.values.rounded``)

    @property
    def target(self) -> str:
        """``--flag`` or ``$ENV``, for messages."""
        return f"--{self.flag}" if self.flag is not None else f"${self.env}"


@dataclass(frozen=True)
class StudySpec:
    """A whole study definition, validated. ``source`` is the YAML file it came from."""

    name: str
    engine: str  # a registered engine's name (``autotune.engines.ENGINES``), checked by the study file's schema
    trials: int
    sampler: Literal["tpe", "random", "nsga2"]
    seed: int
    max_concurrent: int | None
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...]
    ready_timeout_s: float
    server: ServerSpec
    sim: SimSpec | None
    workload: WorkloadSpec
    workload_properties: dict[str, str]
    plan: BenchPlan
    params: tuple[ParamSpec, ...]
    points_to_evaluate: tuple[dict[str, Any], ...] = ()
    source: Path = Path(".")
    # the user's current configuration: ``study.baseline``, else the first of ``points_to_evaluate`` (see ``baseline``)
    baseline_point: dict[str, Any] | None = None
    export_http: tuple[str, int] = ("127.0.0.1", 8000)  # export.http_host / http_port: the exported Serve proxy
    finalists: FinalistsSpec = field(default_factory=FinalistsSpec)  # type: ignore[arg-type]  # pydantic models type their Field defaults as required arguments (no mypy plugin)
    stop_when: StopRule | None = None
    cpu_isolation: Literal["auto", "off"] = "auto"
    speculative_caps: Literal["tie", "sglang-default"] = "tie"  # see EngineModel.tie_caps

    @property
    def gpus_per_trial(self) -> int:
        """GPUs one server needs: tensor parallel x the fixed ``pp-size`` and ``dp-size`` flags, dp only without DP
        attention (``autotune.core.trial.server_gpus``; a searched dp-size is refused)."""
        return server_gpus(self.server.tp_size, self.server.flags)

    @property
    def load_levels(self) -> tuple[int, ...]:
        """The concurrency levels (``level_keys`` has every level, open-loop ones included)."""
        return self.plan.concurrencies

    @property
    def level_keys(self) -> tuple[int | str, ...]:
        """Every level's key in measuring order: concurrencies as ints, open-loop levels as ``"rate8"``..."""
        return tuple(ld.key for ld in self.plan.levels())

    def resolve_level(self, level: Level) -> int:
        """The concurrency a level names: ``"max"`` is the highest load level, ``"min"`` the lowest."""
        if level == "max":
            return max(self.plan.concurrencies)
        if level == "min":
            return min(self.plan.concurrencies)
        return int(level)  # an open-loop key is not a concurrency: callers that need one name a concurrency level

    @property
    def baseline(self) -> dict[str, Any] | None:
        """The user's current configuration, the point every result is judged against: ``study.baseline`` where the
        file gives one, else its first ``points_to_evaluate`` point; None when it gives neither."""
        if self.baseline_point is not None:
            return dict(self.baseline_point)
        return dict(self.points_to_evaluate[0]) if self.points_to_evaluate else None

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"no parameter named {name!r} in study {self.name!r}")

    @property
    def has_secrets(self) -> bool:
        """Whether a fixed variable or flag of the server holds a secret (autotune.core.secrets)."""
        from autotune.core.secrets import has_secrets

        s = self.server
        return has_secrets(s.env, s.secret_env) or has_secrets(s.flags, s.secret_flags)

    def redacted(self) -> StudySpec:
        """This spec with the secret values of the server's variables and flags replaced by ``<redacted>``: what may be
        written or pickled (``study.json``, the searcher state Ray Tune keeps under ``tune/``)."""
        from dataclasses import replace

        from autotune.core.secrets import redact_env, redact_flags

        s = self.server
        safe = {"env": redact_env(s.env, s.secret_env), "flags": redact_flags(s.flags, s.secret_flags)}
        return replace(self, server=s.model_copy(update=safe))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy (for records and exports); secret values of variables and flags are redacted
        (autotune.core.secrets)."""
        safe = self.redacted()
        data = asdict(safe)
        for key in ("server", "sim", "finalists", "stop_when"):  # the file's own sections (pydantic), as their fields
            section = getattr(safe, key)
            data[key] = section.model_dump() if section is not None else None
        data["source"] = str(self.source)
        data["gpus_per_trial"] = self.gpus_per_trial
        return data
