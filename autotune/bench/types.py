"""Typed values that flow through the benchmark: plan in, per-request samples, per-level summaries out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from autotune.bench.load import LevelKey, Load
from autotune.bench.stats import Interval


@dataclass(frozen=True)
class WorkloadSpec:
    """What traffic to send: ``kind`` names a module of ``autotune/bench/workloads/`` (random-ids / synthetic, random,
    jsonl, sharegpt, multi-turn, shared-prefix, trace), which documents the fields it reads.

    Random lengths: uniform in [len * (1 - range_ratio), len] (range_ratio 0 gives fixed lengths).
    JSONL rows: {"prompt": str} or {"input_ids": [int]}, optional "max_new_tokens".
    """

    kind: str = "synthetic"
    input_len: int = 128
    output_len: int = 256
    range_ratio: float = 0.0
    path: str | None = None
    seed: int = 0
    vocab_size: int = 32000  # synthetic input_ids are drawn below this
    ignore_eos: bool = True
    temperature: float = 0.0
    tokenizer: str | None = None  # a local model folder whose tokenizer counts text (else the stated rule)
    context_len: int | None = None  # dataset kinds drop a request whose prompt + output exceeds this
    fixed_output_len: int | None = None  # sharegpt / multi-turn: this output length instead of the answer's
    turns: int = 0  # multi-turn: turns per conversation at most (0 = all)
    think_time_s: float = 0.0  # multi-turn: pause (engine s) between a turn's answer and the next turn
    gsp_groups: int = 64  # shared-prefix: SGLang's --gsp-num-groups ...
    gsp_prompts_per_group: int = 16
    gsp_system_len: int = 2048
    gsp_question_len: int = 128
    trace_block_size: int = 512  # trace: tokens per hash id (Mooncake's block)


@dataclass(frozen=True)
class SLO:
    """Per-request service levels (milliseconds; None = not required). A request is *good* when it succeeded and meets
    every one: its TTFT, its TPOT ((e2e - TTFT) / (output tokens - 1)), its p99 inter-token gap, its e2e latency.
    Goodput is good requests per second (DistServe's sense, as ``vllm bench serve --goodput``)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    itl_ms: float | None = None
    e2e_ms: float | None = None

    def __post_init__(self) -> None:
        for name, limit in asdict(self).items():
            if limit is not None and not limit > 0:
                raise ValueError(f"SLO {name} must be above 0 ms (no request can meet {limit}), got {limit}")

    @property
    def empty(self) -> bool:
        return all(v is None for v in asdict(self).values())


@dataclass(frozen=True)
class TrafficStats:
    """A level's requests as built (tokens as counted then; see ``autotune/bench/workloads/summary.py``)."""

    requests: int
    prompt_tokens_mean: float
    prompt_tokens_median: float
    prompt_tokens_p99: float
    output_tokens_mean: float
    output_tokens_median: float
    output_tokens_p99: float
    prefix_reuse: float  # share of prompt units an ideal prefix cache would already hold


@dataclass(frozen=True)
class Lateness:
    """An open-loop level's sends against their schedule (engine seconds): how late the client sent them."""

    mean_s: float
    p99_s: float
    max_s: float
    late: int  # sends more than LATE_S behind their scheduled time
    shift_s: float = 0.0  # how far the schedule moved in all (no catch-up): the last send's time past its plan


@dataclass(frozen=True)
class BenchPlan:
    """All load levels are measured on ONE warm server, in the order of ``concurrencies``.

    Before each level the server's radix cache is flushed (``flush_cache``) and ``warmup_requests`` unmeasured requests
    are sent, so a level's figures do not depend on the levels before it. A level is then measured in independent
    windows: each window is one closed loop of ``requests_per_level`` requests lasting at least ``min_duration_s``.
    At least ``min_windows`` windows run; more follow until the 95% interval of ``precision_metric`` is within
    ``target_rel_ci`` of its mean (half-width / mean), ``max_windows`` windows ran, or the level's windows took
    ``max_level_wall_s`` (wall seconds; None: no time cap).
    """

    workload: WorkloadSpec
    concurrencies: tuple[int, ...] = (1, 8, 32)
    requests_per_level: int | None = None  # per window; default: max(min_requests, concurrency * rounds)
    rounds: int = 2
    min_requests: int = 8
    warmup_requests: int = 2  # before each level
    min_duration_s: float = 0.0  # keep each window issuing requests until this long has passed (engine seconds)
    request_timeout_s: float = 600.0
    level_timeout_s: float = 1800.0  # per window
    min_windows: int = 2
    max_windows: int = 5
    target_rel_ci: float = 0.05
    max_level_wall_s: float | None = None
    precision_metric: str = "output_tok_per_s"
    flush_cache: bool = True
    # The levels in measuring order when any is not a concurrency (``autotune/bench/load.py``); empty: the levels are
    # ``concurrencies``. ``concurrencies`` then holds the concurrency levels among them.
    loads: tuple[Load, ...] = ()
    slo: SLO | None = None  # per-request SLOs: goodput and SLO attainment per level
    rate_window_s: float = 10.0  # a rate level's window: max(min_requests, rate x this) requests unless set
    max_in_flight: int = 512  # an open-loop level with this many requests unanswered is over-saturated: stopped

    def levels(self) -> tuple[Load, ...]:
        """Every level in measuring order."""
        return self.loads or tuple(Load.closed(c) for c in self.concurrencies)

    greedy_prompts: int = 0  # > 0: first record greedy outputs of this many workload prompts (GreedySample)
    greedy_max_new_tokens: int = 64


@dataclass(frozen=True)
class RequestSample:
    """One request, times in seconds of ENGINE time (wall time x the server's declared time scale)."""

    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft_s: float | None = None
    e2e_s: float | None = None
    itl_s: tuple[float, ...] = ()  # per-token gaps (a chunk's gap spread over its new tokens)
    accept_length: float | None = None  # from meta_info when the server reports it
    spec_verify_ct: int | None = None
    error: str = ""

    @property
    def tpot_s(self) -> float | None:
        if self.e2e_s is None or self.ttft_s is None or self.output_tokens < 2:
            return None
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)


@dataclass(frozen=True)
class Dist:
    """Summary statistics of one latency, in milliseconds."""

    mean: float
    median: float
    p90: float
    p99: float
    count: int


@dataclass(frozen=True)
class LevelSummary:
    concurrency: int
    requests: int
    failed: int
    duration_s: float
    output_tok_per_s: float
    request_per_s: float
    input_tok_per_s: float
    ttft_ms: Dist | None
    itl_ms: Dist | None
    tpot_ms: Dist | None
    e2e_ms: Dist | None
    accept_length: float | None  # output tokens / verify count over the level, when reported
    errors: tuple[str, ...] = ()  # distinct error messages (first few)
    # /server_info avg_spec_accept_length read after this level, its counters zeroed before it (/set_internal_state)
    server_accept_length: float | None = None
    # A level measured in windows: each field above is the mean over ``windows`` (counts and duration: the sum), and
    # ``intervals`` holds mean, sd, n and the 95% interval per metric name (``output_tok_per_s``, ``ttft_ms.p99``, ...).
    windows: tuple[LevelSummary, ...] = ()
    intervals: dict[str, Interval] = field(default_factory=dict)
    stop_reason: str = ""  # why no further window ran: precision / max_windows / time_cap / saturated
    load: str = ""  # an open-loop level's key ("rate8", "trace"); "" for a concurrency level (keyed by concurrency)
    goodput: float | None = None  # requests/s meeting every SLO of the plan (None: no SLO)
    slo_attainment: float | None = None  # share of the level's requests meeting every SLO
    traffic: TrafficStats | None = None  # the level's requests as built (lengths, prefix reuse)
    lateness: Lateness | None = None  # open-loop levels: sends behind schedule
    offered_rate: float | None = None  # open-loop levels: units/s actually sent (engine s; below the set rate when
    # the client fell behind and its schedule moved)

    @property
    def key(self) -> LevelKey:
        """The level's key: its concurrency, or an open-loop level's load key."""
        return self.load or self.concurrency


@dataclass(frozen=True)
class GreedySample:
    """Greedy (temperature 0) output token ids of the workload's first ``len(outputs)`` prompts, sent one at a time
    before the load levels, each capped at ``max_new_tokens``. Two servers of one model that decode alike give equal
    ids; the output-equality gate (``autotune.export.output_gate``) compares them."""

    max_new_tokens: int
    outputs: tuple[tuple[int, ...], ...]
    errors: tuple[str, ...] = ()  # prompts whose request failed (their outputs are empty)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GreedySample:
        return cls(
            max_new_tokens=int(data["max_new_tokens"]),
            outputs=tuple(tuple(int(t) for t in o) for o in data.get("outputs") or ()),
            errors=tuple(data.get("errors") or ()),
        )


@dataclass(frozen=True)
class BenchResult:
    levels: tuple[LevelSummary, ...]
    time_scale: float = 1.0  # engine seconds per wall second (the sim declares it; real = 1)
    server_accept_length: float | None = None  # /server_info avg_spec_accept_length after the run
    wall_s: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    level_order: tuple[LevelKey, ...] = ()  # the level keys in the order they were measured
    cache_flushes: int = 0  # /flush_cache calls the server accepted (0: flushing off or not supported)
    workload: dict[str, Any] | None = None  # kind, token rule, filter counts (what the dataset kinds dropped)
    # Greedy outputs of the plan's sample prompts (autotune.bench.greedy), for the output-equality gate
    greedy: GreedySample | None = None

    def level(self, key: LevelKey) -> LevelSummary:
        for lv in self.levels:
            if lv.key == key:
                return lv
        raise KeyError(f"no load level {key!r}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchResult:
        return cls(
            levels=tuple(_level_from_json(lv) for lv in data["levels"]),
            time_scale=data.get("time_scale", 1.0),
            server_accept_length=data.get("server_accept_length"),
            wall_s=data.get("wall_s", 0.0),
            notes=tuple(data.get("notes") or ()),
            level_order=tuple(data.get("level_order") or ()),
            cache_flushes=int(data.get("cache_flushes") or 0),
            workload=data.get("workload"),
            greedy=GreedySample.from_json(data["greedy"]) if data.get("greedy") else None,
        )


def _dist(d: dict[str, Any] | None) -> Dist | None:
    return Dist(**d) if d else None


def _level_from_json(lv: dict[str, Any]) -> LevelSummary:
    return LevelSummary(
        **{
            **lv,
            "ttft_ms": _dist(lv.get("ttft_ms")),
            "itl_ms": _dist(lv.get("itl_ms")),
            "tpot_ms": _dist(lv.get("tpot_ms")),
            "e2e_ms": _dist(lv.get("e2e_ms")),
            "errors": tuple(lv.get("errors") or ()),
            "windows": tuple(_level_from_json(w) for w in lv.get("windows") or ()),
            "intervals": {k: Interval(**v) for k, v in (lv.get("intervals") or {}).items()},
            "traffic": TrafficStats(**lv["traffic"]) if lv.get("traffic") else None,
            "lateness": Lateness(**lv["lateness"]) if lv.get("lateness") else None,
        }
    )
