"""The study YAML at the edge: a strict YAML reader and pydantic models of the file, with errors turned into ``Problem``s.

Nothing here knows what the values mean; ``autotune.space.checks`` judges them and ``autotune.space.load`` builds
the typed ``StudySpec``. A section whose values need nothing resolved against the rest of the file is its own type in
the ``StudySpec`` as validated here (``SimSpec``, ``FinalistsSpec``, ``StopRule``: frozen, compared by value), and
``ServerSpec`` with its names normalized by ``load_study``.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, NoReturn, Union, get_args, get_origin

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from autotune.core.errors import SpaceError

# ---------------------------------------------------------------------------------------------------------------------
# Problems and how they are reported


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a study file: where (a dotted key path), what, and how to fix it."""

    key: str
    message: str
    fix: str


def raise_problems(source: Path | str, problems: Sequence[Problem]) -> NoReturn:
    """Raise one ``SpaceError`` naming the file and every problem (key, what is wrong, the fix)."""
    lines = [f"{p.key}: {p.message}. Fix: {p.fix}" for p in problems]
    if len(lines) == 1:
        raise SpaceError(f"{source}: {lines[0]}")
    body = "\n".join(f"  - {line}" for line in lines)
    raise SpaceError(f"{source}: {len(lines)} problems in the study file:\n{body}")


def key_path(loc: Iterable[str | int]) -> str:
    """``('params', 'x', 'low')`` -> ``params.x.low``; list indices as ``[i]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def did_you_mean(word: str, options: Iterable[str]) -> str | None:
    """The closest option to a probable typo, or None."""
    found = difflib.get_close_matches(str(word), list(options), n=1, cutoff=0.6)
    return found[0] if found else None


# ---------------------------------------------------------------------------------------------------------------------
# YAML: safe loading, duplicate keys refused, errors with a line number


MAX_STUDY_BYTES = 1 << 20  # a study file is a few KiB; a larger one is refused before it is read
MAX_ALIASES = 1000  # alias uses in one file
MAX_NODES = 100_000  # values in the document with every alias expanded (an alias bomb expands to billions)
MAX_DEPTH = 64  # nesting of lists and mappings, aliases expanded


class _HostileYAML(yaml.composer.ComposerError):
    """A document past one of the loader's limits (aliases, expanded size, nesting)."""


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping (PyYAML would silently keep the last), and a hostile
    document: more than ``MAX_ALIASES`` aliases, nesting deeper than ``MAX_DEPTH``, or more than ``MAX_NODES`` values
    once its aliases are expanded. The limits are checked on the node graph, before anything is built from it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _HostileYAML(
                    None,
                    None,
                    f"more than {MAX_ALIASES} aliases (*name): a study file needs a few at most",
                    self.peek_event().start_mark,
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _HostileYAML(
                    None, None, f"lists or mappings nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        _check_expanded(node)
        return super().construct_document(node)


def _check_expanded(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past ``MAX_NODES`` values or ``MAX_DEPTH`` levels (iteratively: the
    graph may be deep), or that contains itself through an alias."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        if done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            height[key] = 1 + max((height[id(k)] for k in kids), default=0)
            if size[key] > MAX_NODES:
                raise _HostileYAML(
                    None,
                    None,
                    f"its aliases expand to more than {MAX_NODES:,} values (an alias bomb?)",
                    node.start_mark,
                )
            if height[key] > MAX_DEPTH:
                raise _HostileYAML(
                    None,
                    None,
                    f"with its aliases expanded, lists or mappings nest deeper than {MAX_DEPTH} levels",
                    node.start_mark,
                )
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise _HostileYAML(
                None, None, "an alias refers to a value that contains it (a recursive alias)", node.start_mark
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark, "found a key that is not a scalar", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first given on line {seen[key]}); each key, parameter name included, "
                "may appear once per mapping",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a study file into plain data; every failure becomes a ``SpaceError`` naming the file (and line)."""
    if not path.exists():
        raise SpaceError(f"{path}: study file not found. Fix: check the path (relative paths start at {Path.cwd()})")
    if not path.is_file():
        raise SpaceError(f"{path}: is not a file. Fix: pass a study YAML file, e.g. search_spaces/smoke.yaml")
    try:
        size = path.stat().st_size
        if size > MAX_STUDY_BYTES:
            raise SpaceError(
                f"{path}: the file is {size / 2**20:.1f} MiB; a study file may be at most "
                f"{MAX_STUDY_BYTES / 2**20:g} MiB. Fix: pass the study YAML (prompts and data go in "
                "workload files, not in the study)"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpaceError(
            f"{path}: cannot be read ({exc}). Fix: check its permissions and that it is UTF-8 text"
        ) from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _HostileYAML as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        raise SpaceError(
            f"{path}: refused at {where}: {exc.problem}. Fix: write the values out plainly (a study file "
            "needs no alias chains or deep nesting)"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        what = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise SpaceError(
            f"{path}: bad YAML at {where}: {what}. Fix: correct the YAML syntax there "
            "(indentation, a missing ':' or quote; quote strings that contain ': ' or start with '*', '&', '!')"
        ) from exc
    except yaml.YAMLError as exc:
        raise SpaceError(f"{path}: bad YAML: {exc}. Fix: correct the YAML syntax") from exc
    if data is None:
        raise SpaceError(f"{path}: the file is empty. Fix: write a study (see docs/search_space.md)")
    if not isinstance(data, dict):
        raise SpaceError(
            f"{path}: the top level is a {type(data).__name__}, not a mapping. "
            "Fix: start the file with keys such as `study:`, `server:`, `params:`"
        )
    return data


# ---------------------------------------------------------------------------------------------------------------------
# Models of the file (strict: no silent conversion of "2" into 2; unknown keys refused)


def _scalar(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise ValueError(
        f"expected a single value (string, number, true/false or null), got a {type(value).__name__}. "
        "Fix: write one value here"
    )


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number, got {value!r}. Fix: write a number (unquoted)")
    return value


def _flag_value(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        raise ValueError(
            f"got several values {value!r}, but a flag is passed one value (one argument), so SGLang's several-value "
            "flags (--cuda-graph-bs 1 2 4) cannot be set. Fix: give one value (a one-value flag such as "
            "cuda-graph-max-bs instead), or remove the flag to leave it at the server's default"
        )
    if value is None or not isinstance(value, (str, int, float, bool)):
        raise ValueError(
            f"expected a flag value (string, number or true for a bare switch), got {value!r}. "
            "Fix: give a value, or remove the flag to leave it at the server's default"
        )
    return value


def _env_value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(
            f"expected a string or number for an environment variable, got {value!r}. "
            'Fix: quote the value, e.g. "1" or "0"'
        )
    return str(value)


def _level(value: Any) -> Any:
    if isinstance(value, str) and value.strip():
        return value.strip()  # "max", "min" or an open-loop level's key ("rate8"); checks.py judges it
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(
        f'expected a concurrency from load_levels, a rate level\'s key (e.g. "rate8"), "max" or "min", got {value!r}. '
        "Fix: use one of those"
    )


_LOAD_FIX = (
    "write a concurrency (an integer), {rate: R} (requests/s, Poisson), {rate: R, burstiness: B} (gamma arrivals; "
    "B < 1 burstier) or {trace: S} (a trace workload's own times x S; 1 = as recorded)"
)


def _load_level(value: Any) -> Any:
    """One entry of ``load_levels``: an int concurrency, or a mapping naming an open-loop load (``Load``)."""
    from autotune.bench.load import Load

    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected a load level, got {value!r}. Fix: {_LOAD_FIX}")
    keys = set(value)
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"`{k}` must be a number, got {v!r}. Fix: {_LOAD_FIX}")
    if "rate" in keys and keys <= {"rate", "burstiness"}:
        return Load.at_rate(float(value["rate"]), float(value.get("burstiness", 1.0)))
    if keys == {"trace"}:
        return Load.replay(float(value["trace"]))
    raise ValueError(f"a load level mapping with keys {sorted(keys)} is not understood. Fix: {_LOAD_FIX}")


ScalarT = Annotated[Any, AfterValidator(_scalar)]
NumberT = Annotated[Any, AfterValidator(_number)]
FlagValueT = Annotated[Any, AfterValidator(_flag_value)]
EnvValueT = Annotated[Any, AfterValidator(_env_value)]
LevelT = Annotated[Any, AfterValidator(_level)]
LoadLevelT = Annotated[Any, AfterValidator(_load_level)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ObjectiveModel(_Model):
    metric: str
    level: LevelT = "max"
    direction: Literal["maximize", "minimize"] | None = None  # default: by metric (latencies minimized)


class ConstraintModel(_Model):
    metric: str
    level: LevelT | None = None  # default: the first objective's level
    max: NumberT | None = None
    min: NumberT | None = None


class SloModel(_Model):
    """Per-request SLOs (milliseconds): a request is good when it meets each one given (goodput)."""

    ttft_ms: NumberT | None = None
    tpot_ms: NumberT | None = None
    itl_ms: NumberT | None = None
    e2e_ms: NumberT | None = None


class FinalistsSpec(_Model):
    """The finalist stage: the top ``count`` feasible configs relaunched ``rounds`` times each, interleaved; a winner
    is declared where Welch's t test on the primary objective across those launches gives p < ``alpha``."""

    count: int = Field(3, ge=0)  # 0: no finalist stage
    rounds: int = Field(2, ge=1)
    alpha: float = Field(0.05, gt=0, lt=1)


class StopRule(_Model):
    """End the search early: ``no_improvement_launches`` launched trials in a row without a feasible result beyond
    the incumbent's 95% interval (its noise band) on the primary objective."""

    no_improvement_launches: int = Field(gt=0)


class StudyModel(_Model):
    name: str | None = None  # default: the file's stem
    engine: Literal["sim", "sglang"] = "sim"
    trials: int = Field(12, gt=0)
    sampler: Literal["tpe", "random", "nsga2"] = "tpe"
    seed: int = Field(0, ge=0, le=2**32 - 1)  # Optuna and NumPy take seeds of 0 to 2**32 - 1
    max_concurrent: int | None = Field(None, gt=0)
    objectives: list[ObjectiveModel] | None = None
    constraints: list[ConstraintModel] | None = None
    slo: SloModel | None = None  # default: the latency constraints' limits
    ready_timeout_s: float = Field(900.0, gt=0)
    points_to_evaluate: list[dict[str, ScalarT]] = Field(default_factory=list)
    # the user's current configuration, measured first and judged against (default: the first point_to_evaluate)
    baseline: dict[str, ScalarT] | None = None
    finalists: FinalistsSpec = Field(default_factory=FinalistsSpec)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    stop_when: StopRule | None = None
    cpu_isolation: Literal["auto", "off"] = "auto"
    # "tie": a speculative point gets --max-running-requests and the CUDA-graph ceiling set together (neither held at
    # SGLang's speculative default of 48); "sglang-default": leave unset flags to SGLang (the 48 cap included)
    speculative_caps: Literal["tie", "sglang-default"] = "tie"


class ServerSpec(_Model):
    """Fixed for every trial (``server:``). ``flags`` keyed without dashes; ``env`` values are strings. In a
    ``StudySpec`` the names are normalized (``load_study``): ``model_path`` resolved (the sim profile's where the file
    names none), ``host`` stripped, ``secret_flags`` and ``study_only`` keys without dashes."""

    model_path: str = ""  # "" (or null in the file): none named
    tp_size: int = Field(1, gt=0)
    # nodes one server spans (SGLang's --nnodes, a model too large for one node): the trial's GPUs (tp_size x dp) are
    # split evenly over them
    nnodes: int = Field(1, gt=0)
    host: str = "127.0.0.1"
    flags: dict[str, FlagValueT] = Field(default_factory=dict)
    env: dict[str, EnvValueT] = Field(default_factory=dict)
    # names whose values are redacted in records and exports, beyond the built-in pattern (autotune.core.secrets)
    secret_env: list[str] = Field(default_factory=list)
    # flags (without dashes) whose values are credentials, beyond the engine's known ones (autotune.core.secrets)
    secret_flags: list[str] = Field(default_factory=list)
    # Benchmark-only settings (a flag name without dashes, or a variable), with the reason: kept in the records, left
    # out of the production export (best/launch.sh, serve_config.yaml). autotune.export.study_only knows common ones.
    study_only: dict[str, str] = Field(default_factory=dict)

    @field_validator("model_path", mode="before")
    @classmethod
    def _no_model_path(cls, value: Any) -> Any:
        return "" if value is None else value


class SimSpec(_Model):
    """The simulated engine's hardware+model profile and its time scale (engine seconds per wall second)."""

    profile: Annotated[str, AfterValidator(str.strip)]
    time_scale: float = Field(1.0, gt=0)


class WorkloadModel(_Model):
    kind: Literal["synthetic", "random-ids", "random", "jsonl", "sharegpt", "multi-turn", "shared-prefix", "trace"] = (
        "synthetic"
    )
    input_len: int = Field(128, gt=0)
    output_len: int = Field(256, gt=0)
    range_ratio: float = Field(0.0, ge=0, le=1)
    path: str | None = None
    seed: int = Field(0, ge=0)  # seeds NumPy's generators, which take no negative seed
    vocab_size: int = Field(32000, gt=10)  # ids are drawn from [10, vocab_size): bench.workloads.random_ids
    ignore_eos: bool = True
    temperature: float = Field(0.0, ge=0)
    context_len: int | None = Field(None, ge=4)  # dataset kinds drop requests longer than this (default: see docs)
    fixed_output_len: int | None = Field(None, gt=0)  # sharegpt / multi-turn: instead of the answer's length
    turns: int = Field(0, ge=0)  # multi-turn: turns per conversation at most (0 = all)
    think_time_s: float = Field(0.0, ge=0)  # multi-turn: pause between an answer and the next turn
    gsp_groups: int = Field(64, gt=0)
    gsp_prompts_per_group: int = Field(16, gt=0)
    gsp_system_len: int = Field(2048, gt=0)
    gsp_question_len: int = Field(128, gt=0)
    trace_block_size: int = Field(512, gt=0)
    tokenizer: str | None = None  # default: server.model_path when it is a local folder (real engine)
    properties: dict[str, EnvValueT] = Field(default_factory=dict)


class BenchModel(_Model):
    rounds: int = Field(2, gt=0)
    warmup_requests: int = Field(2, ge=0)
    min_requests: int = Field(8, gt=0)
    min_duration_s: float = Field(0.0, ge=0)
    requests_per_level: int | None = Field(None, gt=0)
    request_timeout_s: float = Field(600.0, gt=0)
    level_timeout_s: float = Field(1800.0, gt=0)
    min_windows: int = Field(2, ge=2)
    max_windows: int = Field(5, ge=2)
    target_rel_ci: float = Field(0.05, gt=0, lt=1)
    max_level_s: float | None = Field(None, gt=0)
    flush_cache: bool = True
    rate_window_s: float = Field(10.0, gt=0)  # a rate level's window: max(min_requests, rate x this) requests
    max_in_flight: int = Field(512, gt=0)  # an open-loop level with this many requests unanswered is stopped
    greedy_prompts: int = Field(0, ge=0)  # > 0: record greedy outputs of this many prompts (output-equality gate)
    greedy_max_new_tokens: int = Field(64, gt=0)


class ParamModel(_Model):
    flag: str | None = None
    env: str | None = None
    type: Literal["int", "float", "categorical", "bool"]
    low: NumberT | None = None
    high: NumberT | None = None
    step: NumberT | None = None
    round: int | None = Field(None, ge=0, le=12)  # float: decimal places of the value launched and recorded
    log: bool = False
    choices: list[ScalarT] | None = None
    when: dict[str, Any] | None = None  # judged in checks.py (a list of values or an operator mapping per entry)


class ExportModel(_Model):
    http_host: str = "127.0.0.1"  # where Serve's HTTP proxy binds in the exported serve_config.yaml
    http_port: int = Field(8000, gt=0, lt=65536)


class StudyFileModel(_Model):
    study: StudyModel = Field(default_factory=StudyModel)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    server: ServerSpec = Field(default_factory=ServerSpec)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    sim: SimSpec | None = None
    workload: WorkloadModel = Field(default_factory=WorkloadModel)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    load_levels: list[LoadLevelT] = Field(default_factory=lambda: [1, 8, 32])
    bench: BenchModel = Field(default_factory=BenchModel)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    params: dict[str, ParamModel] = Field(default_factory=dict)
    export: ExportModel = Field(default_factory=ExportModel)  # type: ignore[arg-type]  # pydantic's Field overloads type a model class as default_factory Never (no mypy plugin)
    points_to_evaluate: list[dict[str, ScalarT]] | None = None  # also accepted here; study.points_to_evaluate preferred


# ---------------------------------------------------------------------------------------------------------------------
# Pydantic errors -> Problems


def _unwrap_optional(ann: Any) -> Any:
    if get_origin(ann) in (Union, UnionType):
        args = [a for a in get_args(ann) if a is not NoneType]
        if len(args) == 1:
            return args[0]
    if get_origin(ann) is Annotated:
        return get_args(ann)[0]
    return ann


def _keys_at(root: type[BaseModel], loc: Sequence[str | int]) -> list[str] | None:
    """The keys a mapping at ``loc`` accepts, by walking the models' annotations; None if not a model there."""
    ann: Any = root
    for part in loc:
        ann = _unwrap_optional(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            if not isinstance(part, str) or part not in ann.model_fields:
                return None
            ann = ann.model_fields[part].annotation
        elif get_origin(ann) is dict:
            ann = get_args(ann)[1]
        elif get_origin(ann) is list:
            ann = get_args(ann)[0]
        else:
            return None
    ann = _unwrap_optional(ann)
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return list(ann.model_fields)
    return None


_TYPE_WORDS = {
    "int": ("an integer", "write a whole number without quotes"),
    "float": ("a number", "write a number without quotes"),
    "bool": ("true or false", "write true or false without quotes"),
    "string": ("a string", "write text (quote it if YAML reads it as something else)"),
    "dict": ("a mapping", "write `key: value` entries indented under this key"),
    "model": ("a mapping", "write `key: value` entries indented under this key"),
    "list": ("a list", "write a YAML list, e.g. [1, 8, 32]"),
}


def _problem_from_error(err: Any) -> Problem:
    loc = tuple(err["loc"])
    key = key_path(loc)
    kind: str = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        valid = _keys_at(StudyFileModel, loc[:-1]) or []
        bad = str(loc[-1])
        close = did_you_mean(bad, valid)
        fix = f"did you mean `{close}`?" if close else f"remove it; valid keys here: {', '.join(valid)}"
        return Problem(key, f"unknown key `{bad}`", fix)
    if kind == "missing":
        return Problem(key, "required key is missing", f"add `{loc[-1]}:` (see docs/search_space.md)")
    if kind == "literal_error":
        expected = str((err.get("ctx") or {}).get("expected", ""))
        return Problem(key, f"{value!r} is not allowed", f"use one of {expected}")
    if kind == "value_error":
        text = str(err["msg"]).removeprefix("Value error, ")
        message, _, fix = text.partition(". Fix: ")
        return Problem(key, message, fix or "correct the value")
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = str(err["msg"]).replace("Input should be ", "")
        return Problem(key, f"{value!r} is out of range", f"use a value {bound}")
    for prefix, (word, fix) in _TYPE_WORDS.items():
        if kind.startswith(prefix):
            return Problem(key, f"wrong type: expected {word}, got {value!r} ({type(value).__name__})", fix)
    return Problem(key, f"{err['msg']} (got {value!r})", "correct the value (see docs/search_space.md)")


def parse_file_model(data: dict[str, Any], source: Path) -> StudyFileModel:
    """Validate plain data against the file's models; raise ``SpaceError`` listing every problem found."""
    try:
        return StudyFileModel.model_validate(data)
    except ValidationError as exc:
        problems = list(dict.fromkeys(_problem_from_error(e) for e in exc.errors()))
        raise_problems(source, problems)
