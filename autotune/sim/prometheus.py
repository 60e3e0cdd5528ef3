"""Prometheus text for ``/metrics``, with SGLang's metric names (``sglang:...``)."""

from __future__ import annotations

from autotune.sim.config import SimConfig
from autotune.sim.engine import EngineLoop

TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
E2E_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


def _hist(name: str, help_: str, values: list[float], buckets: tuple[float, ...], labels: str) -> list[str]:
    out = [f"# HELP {name} {help_}", f"# TYPE {name} histogram"]
    for b in buckets:
        out.append(f'{name}_bucket{{{labels},le="{b}"}} {sum(1 for v in values if v <= b)}')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(values)}')
    out.append(f"{name}_sum{{{labels}}} {sum(values):.6f}")
    out.append(f"{name}_count{{{labels}}} {len(values)}")
    return out


def render_metrics(cfg: SimConfig, engine: EngineLoop | None, model_name: str) -> str:
    labels = f'model_name="{model_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
    gauges: list[tuple[str, str, float]] = []
    counters: list[tuple[str, str, float]] = []
    if engine is not None:
        c = engine.counters
        acc = engine.avg_accept_length
        gauges = [
            ("sglang:num_running_reqs", "The number of running requests.", engine.running),
            ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", engine.queued),
            ("sglang:num_used_tokens", "The number of used tokens.", engine.used_tokens),
            ("sglang:token_usage", "The token usage.", engine.token_usage),
            ("sglang:gen_throughput", "The generation throughput (token/s).", c.last_gen_throughput),
            ("sglang:max_total_num_tokens", "KV cache capacity in tokens.", cfg.kv_tokens),
            ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", acc or 0.0),
            (
                "sglang:spec_accept_rate",
                "Accept length / draft tokens.",
                (acc or 0.0) / cfg.spec.num_draft_tokens if cfg.spec else 0.0,
            ),
        ]
        counters = [
            ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", c.prompt_tokens),
            ("sglang:generation_tokens_total", "Number of generation tokens processed.", c.generation_tokens),
            ("sglang:num_requests_total", "Number of requests processed.", c.requests),
            ("sglang:spec_verify_calls_total", "Number of speculative verify calls.", c.verify_calls),
            ("sglang:num_retracted_reqs_total", "Number of retracted requests.", c.retractions),
        ]
    lines: list[str] = []
    for name, help_, value in gauges:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} gauge", f"{name}{{{labels}}} {float(value):.6g}"]
    for name, help_, value in counters:
        lines += [f"# HELP {name} {help_}", f"# TYPE {name} counter", f"{name}{{{labels}}} {float(value):.1f}"]
    if engine is not None:
        lines += _hist(
            "sglang:time_to_first_token_seconds", "TTFT (simulated s).", engine.counters.ttft, TTFT_BUCKETS, labels
        )
        lines += _hist(
            "sglang:e2e_request_latency_seconds", "E2E latency (simulated s).", engine.counters.e2e, E2E_BUCKETS, labels
        )
    return "\n".join(lines) + "\n"
