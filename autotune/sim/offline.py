"""Run the simulated scheduler against a closed-loop load in virtual time: no HTTP, no sleeping, deterministic.

Used by tests (knob directions, determinism) and to fit profiles. The HTTP server runs the same ``Scheduler`` under a
wall clock; through it the numbers also carry client overhead and the configured noise.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from autotune.sim.args import parse_args
from autotune.sim.config import SimConfig, resolve
from autotune.sim.profile import load_profile
from autotune.sim.scheduler import Scheduler, SimRequest


@dataclass(frozen=True)
class OfflineResult:
    concurrency: int
    requests: int
    duration_s: float
    output_tok_per_s: float
    mean_ttft_s: float
    mean_tpot_s: float
    accept_length: float | None
    retractions: int


def build(flags: list[str], env: Mapping[str, str] | None = None, profile: str = "h200-llama-1b") -> SimConfig:
    """Resolve a flag list (SGLang names, without ``--sim-profile``) for a profile."""
    args = parse_args(["--sim-profile", profile, *flags])
    return resolve(args, load_profile(args.sim_profile), env or {})


def make_scheduler(cfg: SimConfig, seed: int = 0) -> Scheduler:
    return Scheduler(
        model=cfg.perf_model(),
        kv_capacity=cfg.kv_tokens,
        max_running=cfg.max_running_requests,
        chunk_size=cfg.chunked_prefill_size,
        max_prefill_tokens=cfg.max_prefill_tokens,
        new_token_ratio=cfg.profile.defaults.new_token_ratio,
        spec=cfg.spec,
        seed=seed,
    )


def simulate_closed_loop(
    cfg: SimConfig,
    concurrency: int,
    requests: int,
    input_len: int,
    output_len: int,
    *,
    seed: int = 0,
    noise: float = 0.0,
) -> tuple[list[SimRequest], float]:
    """``concurrency`` clients, each sending its next request when the previous one finishes (as the benchmark does):
    the finished requests (with their virtual timestamps) and the virtual duration."""
    sched = make_scheduler(cfg, seed)
    noise_rng = random.Random(seed + 1)
    now = 0.0
    sent = 0
    done: list[SimRequest] = []

    def send() -> None:
        nonlocal sent
        sched.add(SimRequest(f"r{sent}", input_len, output_len, arrival=now))
        sent += 1

    for _ in range(min(concurrency, requests)):
        send()
    while sched.has_work():
        it = sched.step(now)
        if it is None:
            break
        factor = 1.0 + noise * noise_rng.gauss(0.0, 1.0) if noise > 0 else 1.0
        now += it.duration * max(factor, 0.5)
        sched.stamp(it, now)
        for r in it.finished:
            done.append(r)
            if sent < requests:
                send()
    return done, now


def run_closed_loop(
    cfg: SimConfig,
    concurrency: int,
    requests: int,
    input_len: int,
    output_len: int,
    *,
    seed: int = 0,
    noise: float = 0.0,
) -> OfflineResult:
    """The closed loop of :func:`simulate_closed_loop`, summarized as a benchmark level (a failing launch raises)."""
    if cfg.failure is not None:
        raise RuntimeError(f"launch fails: {cfg.failure.lines[-1]}")
    done, now = simulate_closed_loop(cfg, concurrency, requests, input_len, output_len, seed=seed, noise=noise)
    out_tokens = sum(r.output for r in done)
    ttft = [r.first_token_at - r.arrival for r in done if r.first_token_at is not None]
    tpot = [
        (r.finished_at - r.first_token_at) / (r.output - 1)
        for r in done
        if r.finished_at is not None and r.first_token_at is not None and r.output > 1
    ]
    verify = sum(r.verify_ct for r in done)
    accept = sum(r.output for r in done) / verify if verify and cfg.spec else None
    return OfflineResult(
        concurrency=concurrency,
        requests=len(done),
        duration_s=now,
        output_tok_per_s=out_tokens / now if now > 0 else 0.0,
        mean_ttft_s=sum(ttft) / len(ttft) if ttft else 0.0,
        mean_tpot_s=sum(tpot) / len(tpot) if tpot else 0.0,
        accept_length=accept,
        retractions=sum(r.retractions for r in done),
    )
