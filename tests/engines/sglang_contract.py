"""The contract between the simulated SGLang server and the pre-launch rules, as functions the tests call.

``rule_mismatches`` runs both on each configuration: the rules (``sglang_rules.violations`` after the engine's
normalization) and the simulator's launch (``autotune.sim`` resolving the same command line: it refuses the arguments,
or its launch fails). They must agree on whether the server starts. ``log_mismatches`` prints the simulator's launch
log for a configuration and parses it with the real parser: every figure the parser reads must be the simulator's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import io
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields

from autotune.engines import sglang_rules
from autotune.engines.base import flags_to_argv, parse_log_phases
from autotune.engines.sglang_facts import PAGED_TREE_BACKENDS
from autotune.sim.args import ServerArgs, build_parser
from autotune.sim.config import ArgsFailure, SimConfig, resolve
from autotune.sim.launch_log import Logger, run_launch
from autotune.sim.profile import Profile, load_profile


@dataclass(frozen=True)
class Case:
    flags: Mapping[str, object]
    env: Mapping[str, str] = field(default_factory=dict)
    tp_size: int = 1
    profile: str = "h200-llama-1b"

    def __str__(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env.items())
        return f"{env} tp={self.tp_size} {' '.join(flags_to_argv(self.flags))}".strip()


def speculative_cases() -> Iterator[Case]:
    """Speculative settings: algorithm x drafter x steps / topk / draft tokens x page size x backend x simulated
    acceptance. Left out, because the outcome depends on the model, which the rules cannot see: NEXTN without a drafter
    (the model must have MTP heads), and steps / topk / draft tokens all unset with page size > 1 and a backend without
    the paged tree (the auto-chosen topk: 4 for Llama, 1 for DeepSeek-style models)."""
    dims = itertools.product(
        (None, "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"),
        (None, "dummy-eagle3"),
        (None, 1, 3),
        (None, 1, 2, 4),
        (None, 2, 4, 8, 32),
        (1, 16),
        ("triton", "torch_native"),
        ({}, {"SGLANG_SIMULATE_ACC_LEN": "3.0"}),
    )
    for algo, drafter, steps, topk, draft, page, backend, env in dims:
        if algo == "NEXTN" and drafter is None:
            continue
        if (
            algo in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
            and steps is topk is draft is None
            and page > 1
            and backend not in PAGED_TREE_BACKENDS
        ):
            continue
        yield Case(
            {
                "speculative-algorithm": algo,
                "speculative-draft-model-path": drafter if algo else None,
                "speculative-num-steps": steps,
                "speculative-eagle-topk": topk,
                "speculative-num-draft-tokens": draft,
                "page-size": page,
                "attention-backend": backend,
            },
            env,
        )


def nccl_cases() -> Iterator[Case]:
    """NCCL_ALGO at tensor parallel 1 and 2 (two GPUs of the H200 x2 profile)."""
    for tp, algo in itertools.product(
        (1, 2),
        (
            None,
            "Ring",
            "Tree",
            "ring,tree",
            "^ring",
            "allreduce:tree",
            "allgather:tree",
            "allreduce:tree;allgather:ring",
            "bogus",
        ),
    ):
        yield Case({}, {"NCCL_ALGO": algo} if algo else {}, tp_size=tp, profile="h200x2-llama-8b")


def rules_reject(case: Case) -> list[str]:
    flags = sglang_rules.normalize(case.flags)
    return sglang_rules.violations(flags, case.env, tp_size=case.tp_size)


@functools.cache
def _profile(name: str) -> Profile:
    return load_profile(name)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def sim_config(case: Case) -> SimConfig:
    """The simulated server's resolved configuration for the case's command line (``sim.args.parse_args``, with the
    parser built once)."""
    argv = [
        "--sim-profile",
        case.profile,
        "--model-path",
        "m",
        "--tp-size",
        str(case.tp_size),
        *flags_to_argv(case.flags),
    ]
    ns = vars(_parser().parse_args(argv))
    args = ServerArgs(**{f.name: ns[f.name] for f in fields(ServerArgs) if f.name in ns})
    return resolve(args, _profile(case.profile), case.env)


def sim_rejects(case: Case) -> str:
    """Why the simulated server does not start, or "" when it does."""
    try:
        cfg = sim_config(case)
    except ArgsFailure as exc:
        return str(exc)
    return " ".join(cfg.failure.lines) if cfg.failure is not None else ""


def rule_mismatches(cases: Iterator[Case]) -> list[str]:
    out = []
    for case in cases:
        rules, sim = rules_reject(case), sim_rejects(case)
        if bool(rules) != bool(sim):
            said = f"rules: {'; '.join(rules)[:200]}" if rules else f"sim: {sim[:200]}"
            out.append(f"{case}: only one side refuses ({said})")
    return out


def launch_log(cfg: SimConfig) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        asyncio.run(run_launch(cfg, Logger(start_epoch=0.0), speedup=1e9))
    return out.getvalue()


def log_mismatches(cases: Iterator[Case]) -> list[str]:
    out = []
    for case in cases:
        cfg = sim_config(case)
        if cfg.failure is not None:
            continue
        plan = cfg.launch
        parsed = parse_log_phases(launch_log(cfg))
        weights = plan.weight_load_s + (plan.draft_load_s if cfg.spec is not None and cfg.spec.drafter else 0.0)
        expected = {
            "weights_loaded_s": round(weights, 2),
            "kv_cache_tokens": cfg.kv_tokens,
            "graph_capture_s": round(plan.graph_capture_s, 2) if cfg.graph_bs else None,
            "max_total_num_tokens": cfg.kv_tokens,
            "max_running_requests": cfg.max_running_requests,
        }
        for name, want in expected.items():
            got = getattr(parsed, name)
            same = got == want if want is None or isinstance(want, int) else got is not None and abs(got - want) < 0.011
            if not same:
                out.append(f"{case}: the parser read {name}={got}, the simulator logged {want}")
    return out
