"""SGLang's validity rules, applied before a launch so that no launch is spent on a point the server would reject.

Pure functions over a trial's flags (keyed without dashes, as in ``TrialConfig.flags``) and environment; SGLang is
never imported. The rules come from SGLang's ``srt/arg_groups/speculative_hook.py`` and from what real launches on
the H200 showed (NCCL settings); NVLink multicast follows the site policy (``autotune.core.site``). The SGLang facts they
use are in ``sglang_facts``, shared with the simulator (``tests/engines/test_sglang_contract.py`` checks that the two
agree).

- ``normalize(flags)`` makes the changes SGLang itself would make silently (topk 1 forces draft tokens = steps + 1),
  so a trial's recorded flags are what the server runs with, and drops omitted flags (None / False).
- ``violations(flags, env, tp_size=...)`` lists what SGLang would reject, or what would fail at runtime; each message
  says what SGLang would do and how to fix the point. A non-empty list means: record the point INVALID, do not launch.
- ``effective_max_running_requests(flags)`` is the running-request limit the server will use when it is known here
  (any speculative algorithm caps it at 48 unless ``--max-running-requests`` is given).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.site import SitePolicy, nvls_problems, study_env_problems
from autotune.engines.sglang_facts import (
    BUILTIN_ALGORITHMS,
    EAGLE_FAMILY,
    NEEDS_DRAFT_MODEL,
    NGRAM_DEFAULT_BFS_BREADTH,
    NGRAM_DEFAULT_TRIE_DEPTH,
    PAGED_TREE_BACKENDS,
    SIMULATE_ACC_LEN,
    SPEC_DEFAULT_MAX_RUNNING_REQUESTS,
    canonical_algorithm,
    is_given,
    max_draft_tokens,
    simulated_accept_length,
    simulated_accept_overflows,
    speculative_algorithm,
)

ALGORITHM = "speculative-algorithm"
DRAFT_MODEL = "speculative-draft-model-path"
STEPS = "speculative-num-steps"
TOPK = "speculative-eagle-topk"
DRAFT_TOKENS = "speculative-num-draft-tokens"
MAX_RUNNING = "max-running-requests"
PAGE_SIZE = "page-size"
ATTENTION_BACKEND = "attention-backend"
DECODE_ATTENTION_BACKEND = "decode-attention-backend"


# NCCL algorithm names (lower case) and the ones AllGather / ReduceScatter can use on one node with NVLS off.
NCCL_ALGOS = frozenset({"ring", "tree", "collnet", "collnetdirect", "collnetchain", "nvls", "nvlstree", "pat"})
RING_ONLY_COLLECTIVES = frozenset({"allgather", "reducescatter"})


def _omitted(value: Any) -> bool:
    return not is_given(value)


def _as_int(value: Any) -> int | None:
    """An integer flag value (int or numeric string); None when absent or not an integer."""
    if _omitted(value) or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def algorithm(flags: Mapping[str, Any]) -> str | None:
    """The speculative algorithm SGLang runs (upper case, ``NEXTN`` as ``EAGLE``), or None when speculation is off."""
    name = speculative_algorithm(flags)
    return canonical_algorithm(name) if name is not None else None


def effective_max_running_requests(flags: Mapping[str, Any]) -> int | None:
    """The running-request limit: the explicit flag, else 48 in any speculative mode, else None (server default)."""
    explicit = _as_int(flags.get(MAX_RUNNING))
    if explicit is not None:
        return explicit
    return SPEC_DEFAULT_MAX_RUNNING_REQUESTS if algorithm(flags) is not None else None


def normalize(flags: Mapping[str, Any]) -> dict[str, Any]:
    """The flags as SGLang will run them: omitted flags dropped, draft tokens = steps + 1 when topk is 1.

    It never adds ``--max-running-requests``: the 48 cap is SGLang's default and stays visible as such.
    """
    out = {k: v for k, v in flags.items() if not _omitted(v)}
    if algorithm(out) in EAGLE_FAMILY:
        steps, topk = _as_int(out.get(STEPS)), _as_int(out.get(TOPK))
        if topk == 1 and steps is not None and steps >= 1:
            out[DRAFT_TOKENS] = steps + 1
    return out


GRAPH_CEILINGS = ("cuda-graph-max-bs-decode", "cuda-graph-max-bs")  # the decode CUDA-graph batch ceiling, by release


def tie_speculative_caps(flags: Mapping[str, Any], highest_load: int) -> dict[str, Any]:
    """A speculative point's running cap and decode CUDA-graph ceiling, set together (a study's ``speculative_caps:
    tie``): SGLang caps a speculative server at 48 running requests unless told otherwise, and decodes batches above
    the graph ceiling without CUDA graphs, so a point that sets one of them and not the other is held by the other.

    The running cap is the explicit ``--max-running-requests``, else the explicit graph ceiling, else the study's
    highest load level; the graph ceiling is the explicit one (either spelling), else the running cap. Both are
    written into the flags, so the record and the exported command show them. Points without speculation are
    returned unchanged."""
    out = dict(flags)
    if algorithm(out) is None:
        return out
    graph_flag = next((g for g in GRAPH_CEILINGS if not _omitted(out.get(g))), None)
    running = _as_int(out.get(MAX_RUNNING))
    graph = _as_int(out.get(graph_flag)) if graph_flag else None
    if running is None:
        running = graph if graph is not None else int(highest_load)
        out[MAX_RUNNING] = running
    if graph_flag is None:
        out[GRAPH_CEILINGS[0]] = running
    return out


def dp_attention(flags: Mapping[str, Any]) -> bool:
    """Whether DP attention is on (``--enable-dp-attention``, or ``--attn-dp-size`` > 1 in newer releases)."""
    if not _omitted(flags.get("enable-dp-attention")):
        return True
    size = _as_int(flags.get("attn-dp-size"))
    return size is not None and size > 1


def violations(
    flags: Mapping[str, Any], env: Mapping[str, str], *, tp_size: int, site: SitePolicy | None = None
) -> list[str]:
    """Every reason SGLang would reject this point or fail on it, or the site forbids; empty when worth a launch.

    ``site``: the site policy (default: this process's environment); NVLS is refused only where it turns multicast off.
    """
    f = normalize(flags)
    out = _speculative(f)
    out += _simulated_accept(f, env)
    out += _nccl(env, tp_size=tp_size)
    out += _nvls(f, env, site)
    out += study_env_problems(env, site)
    return out


def _speculative(f: Mapping[str, Any]) -> list[str]:
    given = speculative_algorithm(f)
    if given is None:
        return []
    if given not in BUILTIN_ALGORITHMS:
        return [
            f"--speculative-algorithm {f.get(ALGORITHM)!r} is not one of SGLang's algorithms (it refuses the name at "
            f"start). Fix: use {', '.join(BUILTIN_ALGORITHMS)}, or leave the flag out (null) to turn speculation off"
        ]
    algo = canonical_algorithm(given)
    out: list[str] = []
    if given in NEEDS_DRAFT_MODEL and _omitted(f.get(DRAFT_MODEL)):
        out.append(
            f"--speculative-algorithm {algo} needs --speculative-draft-model-path: SGLang has no draft model to load "
            "(only DeepSeek-style models with built-in MTP heads find one themselves; use NEXTN for those). "
            "Fix: add a drafter path, or turn speculation off"
        )
    if dp_attention(f) and algo in ("NGRAM", "STANDALONE"):
        out.append(
            f"--speculative-algorithm {algo} does not support DP attention: SGLang raises ValueError at start. "
            "Fix: drop --enable-dp-attention / --attn-dp-size, or use EAGLE/EAGLE3"
        )
    if algo in EAGLE_FAMILY:
        out += _eagle_shape(f)
    if algo == "NGRAM":
        out += _ngram_pages(f)
        out += _ngram_store(f)
    return out


def _eagle_shape(f: Mapping[str, Any]) -> list[str]:
    """Steps / topk / draft tokens: all unset, or steps + topk (+ draft tokens when topk > 1) set and consistent."""
    raw = {name: f.get(name) for name in (STEPS, TOPK, DRAFT_TOKENS)}
    given = {name: v for name, v in raw.items() if not _omitted(v)}
    if not given:
        return []  # SGLang auto-chooses all three for the model
    out: list[str] = []
    values: dict[str, int] = {}
    for name, v in given.items():
        n = _as_int(v)
        if n is None or n < 1:
            out.append(f"--{name} must be a positive integer, got {v!r}. Fix: use 1 or more")
        else:
            values[name] = n
    if out:
        return out
    steps, topk, draft = values.get(STEPS), values.get(TOPK), values.get(DRAFT_TOKENS)
    if steps is None or topk is None:
        missing = " and ".join(f"--{n}" for n in (STEPS, TOPK) if n not in values)
        return [
            f"{', '.join('--' + n for n in given)} set without {missing}: SGLang auto-chooses steps/topk/draft tokens "
            "only when all three are unset, and otherwise crashes at start. "
            "Fix: set --speculative-num-steps and --speculative-eagle-topk together, or leave all three unset"
        ]
    if topk == 1:
        return []  # normalize() already set draft tokens = steps + 1, as SGLang would
    if draft is None:
        out.append(
            f"--speculative-eagle-topk {topk} > 1 needs --speculative-num-draft-tokens (the tree's size). "
            "Fix: set draft tokens, or use topk 1 (draft tokens = steps + 1)"
        )
    else:
        limit = max_draft_tokens(steps, topk) - 1
        if draft - 1 > limit:
            out.append(
                f"--speculative-num-draft-tokens {draft} is too large for steps {steps} x topk {topk}: the draft tree "
                f"holds at most {limit + 1} tokens (draft_tokens - 1 <= topk + (steps - 1) * topk^2) and SGLang fails "
                f"at runtime ('selected index k out of range'). Fix: use at most {limit + 1} draft tokens, "
                "or more steps / a larger topk"
            )
    page = _as_int(f.get(PAGE_SIZE))
    if page is not None and page > 1:
        backend = _backend(f)
        if backend is not None and backend not in PAGED_TREE_BACKENDS:
            out.append(
                f"--speculative-eagle-topk {topk} > 1 with --page-size {page} needs attention backend "
                f"{', '.join(PAGED_TREE_BACKENDS)}, got {backend}: SGLang raises ValueError at start. "
                "Fix: use page size 1, topk 1, or one of those backends"
            )
    return out


def _simulated_accept(f: Mapping[str, Any], env: Mapping[str, str]) -> list[str]:
    """``sglang_facts.simulated_accept_overflows``: a simulated accept length needs steps + 1 draft tokens."""
    try:
        simulated = simulated_accept_length(env) is not None
    except ValueError:
        return [
            f"{SIMULATE_ACC_LEN}={env.get(SIMULATE_ACC_LEN)!r} is not a number: SGLang fails at start. "
            "Fix: use a number such as 3.0, or leave it unset"
        ]
    if not simulated or algorithm(f) not in EAGLE_FAMILY:
        return []
    steps, draft = _as_int(f.get(STEPS)), _as_int(f.get(DRAFT_TOKENS))
    if steps is None or draft is None or not simulated_accept_overflows(steps, draft):
        return []
    return [
        f"--speculative-num-draft-tokens {draft} < steps {steps} + 1 with SGLANG_SIMULATE_ACC_LEN set: SGLang draws "
        f"the simulated accept length up to steps + 1 = {steps + 1} regardless of the tree's size and crashes at its "
        f"first verify. Fix: use at least {steps + 1} draft tokens, or fewer steps"
    ]


def _ngram_store(f: Mapping[str, Any]) -> list[str]:
    """``sglang_facts.NGRAM_DEFAULT_CAPACITY``: the n-gram store must hold one whole window of max-trie-depth tokens."""
    capacity = _as_int(f.get("speculative-ngram-capacity"))
    depth = _as_int(f.get("speculative-ngram-max-trie-depth"))
    depth = NGRAM_DEFAULT_TRIE_DEPTH if depth is None else depth
    if capacity is None or capacity >= depth:
        return []
    return [
        f"NGRAM with --speculative-ngram-capacity {capacity} below --speculative-ngram-max-trie-depth {depth}: the "
        "n-gram store cannot make room for one window of that many tokens (SGLang's Trie::squeeze throws at the "
        "first insert). Fix: a capacity of at least the trie depth"
    ]


def _ngram_pages(f: Mapping[str, Any]) -> list[str]:
    """NGRAM sets topk to its BFS breadth (10 by default): page size > 1 then needs flashinfer."""
    breadth = _as_int(f.get("speculative-ngram-max-bfs-breadth"))
    breadth = NGRAM_DEFAULT_BFS_BREADTH if breadth is None else breadth
    page = _as_int(f.get(PAGE_SIZE))
    backend = _backend(f)
    if breadth > 1 and page is not None and page > 1 and backend not in (None, "flashinfer"):
        return [
            f"NGRAM (tree breadth > 1) with --page-size {page} needs attention backend flashinfer, got {backend}: "
            "SGLang raises ValueError at start. Fix: use page size 1 or --attention-backend flashinfer"
        ]
    return []


def _backend(f: Mapping[str, Any]) -> str | None:
    value = f.get(DECODE_ATTENTION_BACKEND) or f.get(ATTENTION_BACKEND)
    return None if _omitted(value) else str(value).strip().lower()


def _nccl(env: Mapping[str, str], *, tp_size: int) -> list[str]:
    """NCCL_ALGO must leave AllGather / ReduceScatter an algorithm (Ring) at tensor parallel > 1."""
    value = env.get("NCCL_ALGO")
    if value is None or not str(value).strip() or tp_size <= 1:
        return []  # at tensor parallel 1 the server runs no collective: NCCL never reads its settings
    out: list[str] = []
    proto = env.get("NCCL_PROTO")
    with_proto = f" (NCCL_PROTO={proto})" if proto else ""
    for segment in str(value).split(";"):
        segment = segment.strip()
        if not segment:
            continue
        coll, sep, algos = segment.rpartition(":")
        coll = coll.strip().lower()
        names = [a.strip().lower() for a in algos.lstrip().lstrip("^").split(",") if a.strip()]
        unknown = [a for a in names if a not in NCCL_ALGOS]
        if unknown:
            out.append(
                f"NCCL_ALGO={value!r} names unknown algorithm(s) {', '.join(unknown)}: NCCL refuses the setting. "
                f"Fix: use {', '.join(sorted(NCCL_ALGOS))}"
            )
            continue
        allowed = (NCCL_ALGOS - set(names)) if algos.lstrip().startswith("^") else set(names)
        if tp_size <= 1 or "ring" in allowed:
            continue
        if not sep:
            out.append(
                f"NCCL_ALGO={value!r}{with_proto} applies to every collective and leaves AllGather without an "
                "algorithm (AllGather has no Tree): at tensor parallel > 1 SGLang fails during CUDA-graph capture "
                "('no algorithm/protocol available for function AllGather'). Fix: use the per-collective form, "
                "e.g. NCCL_ALGO=allreduce:tree (NCCL >= 2.24), or keep Ring in the list"
            )
        elif coll in RING_ONLY_COLLECTIVES:
            out.append(
                f"NCCL_ALGO={value!r}{with_proto} leaves {coll} without an algorithm (it only has Ring here): "
                f"SGLang fails at CUDA-graph capture. Fix: allow ring for {coll}, or tune allreduce only"
            )
    return out


def _nvls(f: Mapping[str, Any], env: Mapping[str, str], site: SitePolicy | None) -> list[str]:
    """NVLS switches, refused only while the site turns NVLink multicast off (``autotune.core.site``)."""
    return nvls_problems(f, env, site)
