"""What autotune knows about SGLang, each fact written once: the pre-launch rules (``sglang_rules``), the simulated
server (``autotune.sim``), the log parser (``engines.base``) and the reports (``autotune.export``) all read it here.

Where a fact differs between releases, the releases are named. ``tests/engines/test_sglang_contract.py`` checks that the
simulator and the pre-launch rules agree on generated configurations and that the simulator's log lines parse.
Pure data and pure functions; SGLang is never imported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from autotune.core.failures import FailureKind

# ---- speculative decoding (SGLang ``srt/arg_groups/speculative_hook.py``, 0.5.x) -------------------------------------
SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")  # the algorithms the simulator runs
# SGLang's builtins: --speculative-algorithm has no argparse choices; SGLang refuses another name at start
# (SpeculativeAlgorithm.from_string). DFLASH and DSPARK since 0.5.17, UNO since 0.5.23.
BUILTIN_ALGORITHMS = (*SPEC_ALGORITHMS, "DFLASH", "DSPARK", "UNO")
ALGORITHM_ALIASES: Mapping[str, str] = {"NEXTN": "EAGLE"}  # SGLang rewrites the name before anything else
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "STANDALONE"})  # draft trees of steps x topk (names after the aliases)
# Need --speculative-draft-model-path as written on the command line. NEXTN does not: DeepSeek-style models with
# built-in MTP heads find their drafter themselves; nor does DSPARK, whose drafter may be bundled in the target.
NEEDS_DRAFT_MODEL = frozenset({"EAGLE", "EAGLE3", "STANDALONE", "DFLASH"})
# Any speculative algorithm caps the running requests at this unless --max-running-requests is given.
SPEC_DEFAULT_MAX_RUNNING_REQUESTS = 48
# topk > 1 with page size > 1: the attention backends that support the paged draft tree.
PAGED_TREE_BACKENDS = ("flashinfer", "fa3", "triton")
NGRAM_DEFAULT_BFS_BREADTH = 10  # NGRAM's topk is its BFS breadth
NGRAM_DEFAULT_DRAFT_TOKENS = 12
NGRAM_DEFAULT_CAPACITY = 10_000_000  # --speculative-ngram-capacity: trie nodes of the n-gram store
NGRAM_DEFAULT_TRIE_DEPTH = 18  # --speculative-ngram-max-trie-depth: the longest n-gram kept / the match window
# The n-gram store inserts whole windows of up to max-trie-depth tokens; with fewer nodes than that it cannot make room
# (sglang/kernels/jit/csrc/ngram_corpus/trie.cpp, Trie::squeeze), so capacity must be at least the trie depth.
# NGRAM knobs as 0.5.17's --help lists them (flag names, no dashes)
NGRAM_FLAGS = (
    "speculative-ngram-min-bfs-breadth",
    "speculative-ngram-max-bfs-breadth",
    "speculative-ngram-match-type",
    "speculative-ngram-max-trie-depth",
    "speculative-ngram-capacity",
)
NGRAM_STORE_FLAGS = ("speculative-ngram-capacity", "speculative-ngram-max-trie-depth", "speculative-ngram-match-type")
# --speculative-adaptive (0.5.17) adjusts the steps at run time for EAGLE/EAGLE3 with topk 1 only; SGLang switches it
# off, with a warning, for any other algorithm (speculative/adaptive_spec_params.py, adaptive_unsupported_reason).
ADAPTIVE_ALGORITHMS = frozenset({"EAGLE", "EAGLE3"})


# ---- the KV cache (SGLang ``model_runner.profile_max_num_token``: a token's cell is its heads x layers x
# ``element_size(kv_cache_dtype)``) -------------------------------------------------------------------------------------
KV_CACHE_DTYPE = "kv-cache-dtype"
MAX_PREFILL_TOKENS_DEFAULT = 16384  # --max-prefill-tokens: a prefill pass's tokens, the largest one without chunking
# a token's KV bytes under --kv-cache-dtype (0.5.17's choices), relative to the model's own 16-bit cache ("auto"); fp4
# keeps an 8-bit scale per 16 values (4.5 bits), mxfp8 one per 32 (8.25 bits; model_executor/pool_configurator.py)
KV_CACHE_DTYPE_SCALE: Mapping[str, float] = {
    "auto": 1.0,
    "bf16": 1.0,
    "bfloat16": 1.0,
    "fp8_e5m2": 0.5,
    "fp8_e4m3": 0.5,
    "mxfp8": 0.516,
    "fp4_e2m1": 0.28,
    "nvfp4": 0.28,
    "fp4_mx_block16": 0.28,
}


def is_given(value: Any) -> bool:
    """Whether a flag value puts the flag on the command line: ``None`` and ``False`` omit it (the one idea of off)."""
    return value is not None and value is not False


def speculative_algorithm(flags: Mapping[str, Any]) -> str | None:
    """The ``--speculative-algorithm`` as given (upper case), or None when speculation is off (the flag omitted)."""
    value = flags.get("speculative-algorithm")
    return str(value).strip().upper() if is_given(value) else None


def canonical_algorithm(name: str) -> str:
    """The algorithm SGLang runs for a name it accepts (``NEXTN`` runs as ``EAGLE``)."""
    return ALGORITHM_ALIASES.get(name, name)


SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"  # EAGLE-family verification accepts this many tokens a step on average


def simulated_accept_length(env: Mapping[str, str]) -> float | None:
    """``SGLANG_SIMULATE_ACC_LEN`` when it is on (a number > 0), else None. Raises ValueError for a value that is not a
    number (SGLang's ``float()`` fails at start)."""
    raw = env.get(SIMULATE_ACC_LEN)
    if raw is None or not str(raw).strip():
        return None
    value = float(raw)
    return value if value > 0 else None


def accept_source(flags: Mapping[str, Any], env: Mapping[str, str], engine_simulated: bool) -> str | None:
    """Where a trial's accept length comes from: None without speculation; ``"simulated"`` on the simulated engine or
    with ``SGLANG_SIMULATE_ACC_LEN`` (verification acts as if that many tokens were accepted: a number chosen, not
    measured); else ``"measured"`` (real weights and drafter on a real server, read from ``meta_info`` and
    ``/server_info``)."""
    if speculative_algorithm(flags) is None:
        return None
    if engine_simulated or simulated_accept_length(env) is not None:
        return "simulated"
    return "measured"


def simulated_accept_overflows(steps: int, draft_tokens: int) -> bool:
    """With a simulated accept length, SGLang draws each step's accept length up to steps + 1 whatever the tree's size:
    fewer draft tokens and the first verify writes past the tree, and the server dies at its warmup
    ("The expanded size of the tensor (4) must match the existing size (5)": steps 4 x topk 2 x 4 draft tokens)."""
    return draft_tokens < steps + 1


def max_draft_tokens(steps: int, topk: int) -> int:
    """The most draft tokens a tree of ``steps`` x ``topk`` holds: draft_tokens - 1 <= topk + (steps - 1) * topk^2.
    More fails at runtime ("selected index k out of range")."""
    return topk + (steps - 1) * topk * topk + 1


# ---- flag spellings per release --------------------------------------------------------------------------------------
# (what a study says, what another release calls it): 0.5.23 made --cuda-graph-max-bs ambiguous (it split into
# -decode / -prefill); 0.5.10 and older have only --cuda-graph-max-bs; --server-info was --get-server-info.
FLAG_RENAMES: tuple[tuple[str, str], ...] = (
    ("cuda-graph-max-bs", "cuda-graph-max-bs-decode"),
    ("cuda-graph-max-bs-decode", "cuda-graph-max-bs"),
    ("server-info", "get-server-info"),
)

# ---- log lines (what ``launch_server`` prints while it starts) -------------------------------------------------------
LOG_PATTERNS: Mapping[str, re.Pattern[str]] = {
    "weights": re.compile(r"Load weight end\. elapsed=\s*([0-9.]+)\s*s"),
    "kv_tokens": re.compile(r"KV Cache is allocated\..*#tokens:\s*(\d+)"),
    # 0.5.17: "Capture target decode CUDA graph end. elapsed=2.34 s"; older: "Capture cuda graph end. Time elapsed: 3.2 s"
    "graph": re.compile(r"Capture (?:[\w ]+ )?(?:cuda|CUDA) graph end\.\s*(?:Time )?elapsed[:=]\s*([0-9.]+)\s*s"),
    "max_total": re.compile(r"max_total_num_tokens=(\d+)"),
    "max_running": re.compile(r"max_running_requests=(\d+)"),
}

# A dead server's log tail -> why (first match wins). argparse first: a value the release rejects for a flag it knows,
# then a flag it does not know.
FAILURE_PATTERNS: tuple[tuple[FailureKind, re.Pattern[str]], ...] = (
    (
        FailureKind.INVALID_VALUE,
        re.compile(r"argument [^\n]*: (invalid choice|invalid \w+ value|expected one argument)"),
    ),
    (FailureKind.UNKNOWN_FLAG, re.compile(r"unrecognized arguments|ambiguous option")),
    (FailureKind.ENGINE_UNAVAILABLE, re.compile(r"No module named '?sglang|No module named sglang")),
    (FailureKind.NCCL_ERROR, re.compile(r"NCCL error|NCCL WARN Error|ncclInvalidUsage|ncclSystemError")),
    (FailureKind.GRAPH_CAPTURE_FAILED, re.compile(r"Capture cuda graph failed|CUDA graph capture failed", re.I)),
    (
        FailureKind.OOM_AT_LAUNCH,
        re.compile(
            r"Not enough memory|no GPU memory for the KV cache|CUDA out of memory"
            r"|OutOfMemoryError|increase --mem-fraction-static",
            re.I,
        ),
    ),
)
# argparse's error lines: "error: argument --attention-backend: invalid choice: 'x' (choose from ...)",
# "error: unrecognized arguments: --no-such-flag 1", "error: ambiguous option: --cuda-graph-max-bs could match ...".
ARGPARSE_ARGUMENT = re.compile(r"error: (?:argument (?:-\w+/)?|ambiguous option: )--([\w-]+)")
ARGPARSE_UNRECOGNIZED = re.compile(r"error: unrecognized arguments: ([^\n]*)")
