"""SGLang's model for the search policy (``base.EngineModel``): its validity rules (``sglang_rules``), its running
cap, its memory plan and its speculative decoding, read from a trial's flags. The simulated engine speaks the same
flags and uses this model too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.engines import sglang_rules
from autotune.engines.base import EngineModel
from autotune.engines.memory import Sizes
from autotune.engines.sglang_facts import (
    KV_CACHE_DTYPE,
    KV_CACHE_DTYPE_SCALE,
    MAX_PREFILL_TOKENS_DEFAULT,
    NGRAM_DEFAULT_DRAFT_TOKENS,
    NGRAM_STORE_FLAGS,
    SIMULATE_ACC_LEN,
    accept_source,
    is_given,
)

MEM_FRACTION = "mem-fraction-static"
DISABLE_CUDA_GRAPH = "disable-cuda-graph"  # deprecated in 0.5.17 for the two below
DISABLE_DECODE_GRAPH = "disable-decode-cuda-graph"
DECODE_GRAPH_BACKEND = "cuda-graph-backend-decode"
CHUNKED_PREFILL = "chunked-prefill-size"
MAX_PREFILL = "max-prefill-tokens"
MAX_TOTAL_TOKENS = "max-total-tokens"
PP_SIZE = "pp-size"


def _num(flags: Mapping[str, Any], name: str) -> float | None:
    """A numeric flag value (a number or a numeric string); None when omitted, a switch, or not a number."""
    v = flags.get(name)
    if v is None or v is False or v is True:
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class SGLangModel(EngineModel):
    name = "SGLang"
    running_cap_flag = sglang_rules.MAX_RUNNING
    memory_fraction_flag = MEM_FRACTION
    drafter_flag = sglang_rules.DRAFT_MODEL
    graph_ceiling_flags = sglang_rules.GRAPH_CEILINGS

    def normalize(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        return sglang_rules.normalize(flags)

    def violations(self, flags: Mapping[str, Any], env: Mapping[str, str], *, tp_size: int) -> list[str]:
        return sglang_rules.violations(flags, env, tp_size=tp_size)

    def tie_caps(self, flags: Mapping[str, Any], highest_load: int) -> dict[str, Any]:
        return sglang_rules.tie_speculative_caps(flags, highest_load)

    def running_cap(self, flags: Mapping[str, Any]) -> int | None:
        """The explicit ``--max-running-requests``, else 48 in any speculative mode, else None (SGLang's default)."""
        return sglang_rules.effective_max_running_requests(flags)

    def speculation(self, flags: Mapping[str, Any]) -> str | None:
        """``--speculative-algorithm`` as SGLang runs it (upper case, ``NEXTN`` as ``EAGLE``)."""
        return sglang_rules.algorithm(flags)

    def drafter(self, flags: Mapping[str, Any]) -> str | None:
        value = flags.get(self.drafter_flag)
        if self.speculation(flags) is None or value is None or value is False:
            return None
        return str(value)

    def draft_store(self, flags: Mapping[str, Any]) -> str | None:
        """NGRAM drafts from its n-gram store: named by the store's settings (``sglang_facts.NGRAM_STORE_FLAGS``; draft
        tokens and breadth only shape the tree it proposes)."""
        if self.speculation(flags) != "NGRAM":
            return None
        knobs = {k: flags[k] for k in NGRAM_STORE_FLAGS if k in flags}
        return "NGRAM " + " ".join(f"--{k} {v}" for k, v in sorted(knobs.items())) if knobs else "NGRAM (defaults)"

    def accept_source(self, flags: Mapping[str, Any], env: Mapping[str, str], simulated: bool) -> str | None:
        return accept_source(flags, env, simulated)

    def sets_simulated_acceptance(self, env: Mapping[str, str]) -> bool:
        """``SGLANG_SIMULATE_ACC_LEN`` present in the environment (whatever its value)."""
        return SIMULATE_ACC_LEN in env

    def memory_fraction(self, flags: Mapping[str, Any]) -> float | None:
        return _num(flags, MEM_FRACTION)

    def cuda_graphs(self, flags: Mapping[str, Any]) -> bool:
        """False under any of SGLang's spellings of decode graphs off: ``--cuda-graph-backend-decode disabled``,
        ``--disable-decode-cuda-graph`` (0.5.17) or the deprecated ``--disable-cuda-graph``."""
        backend = flags.get(DECODE_GRAPH_BACKEND)
        off = is_given(backend) and str(backend).strip().lower() == "disabled"
        return not (off or is_given(flags.get(DISABLE_CUDA_GRAPH)) or is_given(flags.get(DISABLE_DECODE_GRAPH)))

    def graph_ceiling(self, flags: Mapping[str, Any]) -> float | None:
        """The first of the ceiling's spellings set to a non-zero number (None: SGLang's default)."""
        decode, plain = (_num(flags, name) for name in self.graph_ceiling_flags)
        return decode or plain

    def graph_tokens_per_request(self, flags: Mapping[str, Any]) -> int:
        """1, or draft tokens + 1 for a speculative verify graph (NGRAM's default: 12 draft tokens)."""
        algo = self.speculation(flags)
        if algo is None:
            return 1
        default = NGRAM_DEFAULT_DRAFT_TOKENS if algo == "NGRAM" else 0
        return int(_num(flags, sglang_rules.DRAFT_TOKENS) or default) + 1

    def prefill_chunk(self, flags: Mapping[str, Any]) -> float | None:
        """``--chunked-prefill-size``; with chunking off (-1, or any value <= 0) a prefill pass holds up to
        ``--max-prefill-tokens`` (16384 by default)."""
        chunk = _num(flags, CHUNKED_PREFILL)
        if chunk is not None and chunk <= 0:
            return _num(flags, MAX_PREFILL) or MAX_PREFILL_TOKENS_DEFAULT
        return chunk

    def kv_token_cap(self, flags: Mapping[str, Any]) -> int | None:
        """``--max-total-tokens``: SGLang allocates the smaller of it and the cache the memory holds."""
        cap = _num(flags, MAX_TOTAL_TOKENS)
        return int(cap) if cap is not None and cap > 0 else None

    def stage_share(self, sizes: Sizes, flags: Mapping[str, Any]) -> float:
        """``--pp-size`` stages hold the layers split as SGLang's ``get_pp_indices`` does (the last ``layers % pp``
        stages one more): the fullest holds ``ceil(layers / pp)``; 1 / pp where the layer count is unknown."""
        pp = int(_num(flags, PP_SIZE) or 1)
        if pp <= 1:
            return 1.0
        return -(-sizes.num_layers // pp) / sizes.num_layers if sizes.num_layers > 0 else 1.0 / pp

    def kv_bytes_per_token(self, sizes: Sizes, flags: Mapping[str, Any], *, tp_size: int) -> float:
        """The target's KV bytes of a pipeline stage's layers (``stage_share``) split over tensor parallel (all of it
        on every rank for MLA; a rank holds at least one KV head, ``ModelConfig.get_num_kv_heads``: 4 KV heads at TP 8
        take one head's bytes on every rank), at the size of ``--kv-cache-dtype`` (fp8 halves it), the drafter's
        layers added: SGLang's draft model keeps its cache in the same pool, a token for a token."""
        tp = max(int(tp_size), 1)
        if sizes.kv_replicated:
            per_token = sizes.kv_bytes_per_token
        elif sizes.kv_heads > 0:
            per_token = sizes.kv_bytes_per_token / sizes.kv_heads * max(1, sizes.kv_heads // tp)
        else:
            per_token = sizes.kv_bytes_per_token / tp
        dtype = flags.get(KV_CACHE_DTYPE)
        per_token *= KV_CACHE_DTYPE_SCALE.get(str(dtype), 1.0) if is_given(dtype) else 1.0
        drafter = sizes.drafter(self.drafter(flags))
        share = self.stage_share(sizes, flags)
        if drafter and sizes.num_layers:
            return per_token * (share + drafter[1] / sizes.num_layers)
        return per_token * share


SGLANG = SGLangModel()
