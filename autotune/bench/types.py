"""Typed values that flow through the benchmark: plan in, per-request samples, per-level summaries out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from autotune.bench.stats import Interval


@dataclass(frozen=True)
class WorkloadSpec:
    """What traffic to send. ``kind='synthetic'`` draws seeded lengths; ``kind='jsonl'`` reads prompts from a file.

    Synthetic lengths: uniform in [len * (1 - range_ratio), len] (range_ratio 0 gives fixed lengths).
    JSONL rows: {"prompt": str} or {"input_ids": [int]}, optional "max_new_tokens".
    """

    kind: Literal["synthetic", "jsonl"] = "synthetic"
    input_len: int = 128
    output_len: int = 256
    range_ratio: float = 0.0
    path: str | None = None
    seed: int = 0
    vocab_size: int = 32000  # synthetic input_ids are drawn below this
    ignore_eos: bool = True
    temperature: float = 0.0


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
    stop_reason: str = ""  # why no further window ran: precision / max_windows / time_cap


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
        return cls(max_new_tokens=int(data["max_new_tokens"]),
                   outputs=tuple(tuple(int(t) for t in o) for o in data.get("outputs") or ()),
                   errors=tuple(data.get("errors") or ()))


@dataclass(frozen=True)
class BenchResult:
    levels: tuple[LevelSummary, ...]
    time_scale: float = 1.0  # engine seconds per wall second (the sim declares it; real = 1)
    server_accept_length: float | None = None  # /server_info avg_spec_accept_length after the run
    wall_s: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    level_order: tuple[int, ...] = ()  # the concurrencies in the order they were measured
    cache_flushes: int = 0  # /flush_cache calls the server accepted (0: flushing off or not supported)
    # Greedy outputs of the plan's sample prompts (autotune.bench.greedy), for the output-equality gate
    greedy: GreedySample | None = None

    def level(self, concurrency: int) -> LevelSummary:
        for lv in self.levels:
            if lv.concurrency == concurrency:
                return lv
        raise KeyError(f"no load level with concurrency {concurrency}")

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
        }
    )
