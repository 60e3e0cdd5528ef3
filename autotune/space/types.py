"""Typed values of a study definition: what ``load_study`` returns and the driver, searcher and exporter read.

Everything here is a frozen dataclass built from a validated YAML file (see ``autotune.space.schema``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from autotune.bench.types import BenchPlan, WorkloadSpec

Scalar = str | int | float | bool | None
Level = int | Literal["max", "min"]
ParamType = Literal["int", "float", "categorical", "bool"]

# Metric names an objective or constraint may name (LevelSummary fields; latencies with a statistic).
SCALAR_METRICS: tuple[str, ...] = ("output_tok_per_s", "request_per_s", "input_tok_per_s", "accept_length")
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
    form is written. ``parse_objective_key`` reads it back."""
    return f"{metric}@{level}"


def parse_objective_key(key: str) -> tuple[str, Level]:
    """``"ttft_ms.p99@32"`` -> ``("ttft_ms.p99", 32)``; raises ValueError for a key without ``@``."""
    metric, sep, level = key.rpartition("@")
    if not sep or not metric or not level:
        raise ValueError(f"{key!r} is not <metric>@<level> (e.g. output_tok_per_s@max)")
    return metric, int(level) if level.isdigit() else level  # type: ignore[return-value]


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
class ServerSpec:
    """Fixed for every trial. ``flags`` keyed without dashes; ``env`` values are strings."""

    model_path: str
    tp_size: int = 1
    host: str = "127.0.0.1"
    flags: dict[str, str | int | float | bool] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[str, ...] = ()  # redacted beyond autotune.secrets.SECRET_NAME
    study_only: dict[str, str] = field(default_factory=dict)  # flag or variable -> why it is benchmark-only


@dataclass(frozen=True)
class SimSpec:
    """The simulated engine's hardware+model profile and its time scale (engine seconds per wall second)."""

    profile: str
    time_scale: float = 1.0


@dataclass(frozen=True)
class FinalistsSpec:
    """The finalist stage: the top ``count`` feasible configs relaunched ``rounds`` times each, interleaved; a winner
    is declared where Welch's t test on the primary objective across those launches gives p < ``alpha``."""

    count: int = 3
    rounds: int = 2
    alpha: float = 0.05


@dataclass(frozen=True)
class StopRule:
    """End the search early: ``no_improvement_launches`` launched trials in a row without a feasible result beyond
    the incumbent's 95% interval (its noise band) on the primary objective."""

    no_improvement_launches: int


@dataclass(frozen=True)
class StudySpec:
    """A whole study definition, validated. ``source`` is the YAML file it came from."""

    name: str
    engine: Literal["sim", "sglang"]
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
    finalists: FinalistsSpec = field(default_factory=FinalistsSpec)
    stop_when: StopRule | None = None
    cpu_isolation: Literal["auto", "off"] = "auto"
    speculative_caps: Literal["tie", "sglang-default"] = "tie"  # see sglang_rules.tie_speculative_caps

    @property
    def gpus_per_trial(self) -> int:
        """GPUs one server needs: tensor parallel x the fixed ``dp-size`` flag (a searched dp-size is refused)."""
        dp = self.server.flags.get("dp-size") or 1
        return int(self.server.tp_size) * int(dp)

    @property
    def load_levels(self) -> tuple[int, ...]:
        return self.plan.concurrencies

    def resolve_level(self, level: Level) -> int:
        """The concurrency a level names: ``"max"`` is the highest load level, ``"min"`` the lowest."""
        if level == "max":
            return max(self.plan.concurrencies)
        if level == "min":
            return min(self.plan.concurrencies)
        return int(level)

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"no parameter named {name!r} in study {self.name!r}")

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready copy (for records and exports); secret environment values are redacted (autotune.secrets)."""
        from autotune.secrets import redact_env

        data = asdict(self)
        data["server"]["env"] = redact_env(self.server.env, self.server.secret_env)
        data["source"] = str(self.source)
        data["gpus_per_trial"] = self.gpus_per_trial
        return data
