"""The simulated engine's performance model. Pure: numbers in, seconds and bytes out, no I/O, no clock.

Every equation is written out in ``docs/simulator.md`` with its source. In short, one forward pass of the target over
``n`` tokens of ``s`` sequences with ``ctx`` cached tokens costs, per GPU (tensor parallel size ``tp``):

    t_mem   = (W_dense + W_expert * (1 - (1 - k/E)^n) + ctx * kv_bytes) / (BW * eff)
    t_comp  = 2 * P_active / tp * n / (FLOPS * eff)          (+ attention FLOPs for prefill)
    t_body  = max(t_mem, t_comp, L * layer_floor)
    t_comm  = L * ar_per_layer * allreduce(n * hidden * 2 bytes)
    t       = t_body + s * per_seq + t_comm + fixed           (CUDA graph)
            = max(that, L * eager_layer + fixed)              (no CUDA graph: CPU-bound launches)

Speculative steps add ``steps + 1`` drafter passes and verify ``s * draft_tokens`` tokens in one target pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.engines.sglang_facts import KV_CACHE_DTYPE_SCALE
from autotune.sim.nccl import NcclSettings, custom_allreduce_us, nccl_allreduce_us
from autotune.sim.profile import Drafter, Profile
from autotune.sim.spec import SpecConfig

ATTENTION_FACTOR = {  # per-sequence attention cost relative to triton (assumed; docs/simulator.md)
    "triton": 1.0,
    "flashinfer": 0.9,
    "fa3": 0.85,
    "fa4": 0.85,
    "flashmla": 0.8,
    "cutlass_mla": 0.85,
    "trtllm_mla": 0.8,
    "trtllm_mha": 0.85,
    "torch_native": 4.0,
}


@dataclass(frozen=True)
class ModelKnobs:
    """The resolved settings the cost equations read (built by ``config.resolve``)."""

    tp: int
    custom_ar: bool
    nccl: NcclSettings
    graph_max_bs: int  # 0: no CUDA graphs
    attention_backend: str
    kv_cache_dtype: str
    torch_compile: bool
    torch_compile_max_bs: int
    prefill_graph: bool
    overlap_schedule: bool
    spec: SpecConfig | None


@dataclass(frozen=True)
class StepCost:
    seconds: float
    graph: bool
    comm_seconds: float


class PerfModel:
    """Cost of forward passes for one profile under one set of knobs."""

    def __init__(self, profile: Profile, knobs: ModelKnobs) -> None:
        self.profile = profile
        self.knobs = knobs
        hw, m = profile.hardware, profile.model
        self._bw = hw.mem_bw_gbps * hw.mem_bw_efficiency * 1e9
        self._flops = hw.tflops_bf16 * hw.compute_efficiency * 1e12
        self._dense = (m.weight_gb - m.expert_weight_gb) * 1e9 / knobs.tp
        self._expert = m.expert_weight_gb * 1e9 / knobs.tp
        self._kv_tok = kv_bytes_per_token(profile, knobs.tp, knobs.kv_cache_dtype)
        self._attn = ATTENTION_FACTOR.get(knobs.attention_backend, 1.0)
        self._ar_cache: dict[int, float] = {}

    # ---- collectives -------------------------------------------------------------------------------------------
    def allreduce_us(self, nbytes: float) -> float:
        """One all-reduce of ``nbytes`` across the TP group: custom all-reduce when on and the message fits, else NCCL."""
        key = int(nbytes)
        hit = self._ar_cache.get(key)
        if hit is not None:
            return hit
        hw, tp = self.profile.hardware, self.knobs.tp
        t: float | None = None
        if self.knobs.custom_ar:
            t = custom_allreduce_us(nbytes, tp, hw)
        if t is None:
            t, _ = nccl_allreduce_us(nbytes, tp, hw, self.knobs.nccl)
        self._ar_cache[key] = t
        return t

    # ---- target forward ----------------------------------------------------------------------------------------
    def expert_touch_fraction(self, n_tokens: float) -> float:
        m = self.profile.model
        if m.num_experts <= 0 or m.expert_weight_gb <= 0:
            return 1.0
        return 1.0 - (1.0 - m.experts_top_k / m.num_experts) ** max(n_tokens, 0.0)

    def forward(self, n_tokens: int, n_seqs: int, ctx_tokens: int, *, graph: bool, prefill: bool = False) -> StepCost:
        """Seconds of one target forward pass over ``n_tokens`` new tokens of ``n_seqs`` sequences."""
        m, tp = self.profile.model, self.knobs.tp
        weight_bytes = self._dense + self._expert * self.expert_touch_fraction(n_tokens)
        kv_bytes = ctx_tokens * self._kv_tok
        t_mem = (weight_bytes + kv_bytes) / self._bw
        flops = 2.0 * m.active_params_b * 1e9 / tp * n_tokens
        if prefill:
            flops += (
                4.0
                * n_tokens
                * (ctx_tokens / max(n_seqs, 1) + n_tokens / max(n_seqs, 1) / 2)
                * m.hidden_size
                * m.num_layers
                / tp
            )
        t_comp = flops / self._flops
        floor = m.num_layers * m.layer_floor_us * 1e-6
        if self.knobs.torch_compile and graph and n_seqs <= self.knobs.torch_compile_max_bs:
            floor *= 0.9
        t_body = max(t_mem, t_comp, floor)
        t_seq = n_seqs * m.per_seq_us * 1e-6 * self._attn
        t_comm = m.num_layers * m.allreduces_per_layer * self.allreduce_us(n_tokens * m.hidden_size * 2) * 1e-6
        t_fixed = m.step_fixed_us * 1e-6
        t = t_body + t_seq + t_comm + t_fixed
        if prefill:
            t += n_tokens * m.prefill_token_us * 1e-6
        eager = m.num_layers * m.eager_layer_us * 1e-6 + t_fixed
        if prefill:
            eager *= 0.3 if self.knobs.prefill_graph else 1.0
            t = max(t, eager)
        elif not graph:
            t = max(t, eager)
        if not prefill and not self.knobs.prefill_graph:
            t *= self.profile.defaults.prefill_graph_off_decode_factor
        if not self.knobs.overlap_schedule:
            t += (150.0 + 4.0 * n_seqs) * 1e-6  # scheduler CPU time no longer hidden behind the GPU
        return StepCost(t, graph, t_comm)

    # ---- drafter -----------------------------------------------------------------------------------------------
    def drafter_forward(self, d: Drafter, n_tokens: int, n_seqs: int, *, graph: bool) -> float:
        m, tp = self.profile.model, self.knobs.tp
        t_mem = d.weight_gb * 1e9 / tp / self._bw
        t_body = max(t_mem, d.num_layers * d.layer_floor_us * 1e-6)
        t_comm = d.num_layers * 2 * self.allreduce_us(n_tokens * m.hidden_size * 2) * 1e-6
        t = t_body + t_comm + d.step_fixed_us * 1e-6 + n_seqs * d.per_seq_us * 1e-6
        if not graph:
            t = max(t, d.num_layers * m.eager_layer_us * 1e-6 + d.step_fixed_us * 1e-6 * 2)
        return t

    # ---- one scheduler iteration -------------------------------------------------------------------------------
    def decode_step(self, n_seqs: int, ctx_tokens: int, accepted_drafts: float | None = None) -> StepCost:
        """One decode iteration of the running batch (with speculation: draft + verify + draft extend).

        ``accepted_drafts``: draft tokens accepted over the batch this step (default: the expected number).
        """
        graph = 0 < n_seqs <= self.knobs.graph_max_bs
        spec = self.knobs.spec
        if spec is None:
            return self.forward(n_seqs, n_seqs, ctx_tokens, graph=graph)
        verify = self.forward(n_seqs * spec.num_draft_tokens, n_seqs, ctx_tokens, graph=graph)
        if spec.drafter is None:  # NGRAM: CPU trie lookups, no draft model
            extra = n_seqs * self.profile.ngram.cpu_us_per_seq * 1e-6
        else:
            d = spec.drafter
            first = self.drafter_forward(d, n_seqs, n_seqs, graph=graph)
            rest = self.drafter_forward(d, n_seqs * spec.topk, n_seqs, graph=graph) * (spec.num_steps - 1)
            extend = self.drafter_forward(d, n_seqs * spec.num_draft_tokens, n_seqs, graph=graph)
            if accepted_drafts is None:
                accepted_drafts = n_seqs * (spec.expected_accept_length - 1.0)
            extra = first + rest + extend + accepted_drafts * d.accept_token_us * 1e-6
        return StepCost(verify.seconds + extra, graph, verify.comm_seconds)

    def prefill(self, n_tokens: int, n_seqs: int, ctx_tokens: int) -> float:
        """One prefill (extend) pass over ``n_tokens`` new tokens; the drafter also runs it under speculation."""
        t = self.forward(n_tokens, n_seqs, ctx_tokens, graph=False, prefill=True).seconds
        spec = self.knobs.spec
        if spec is not None and spec.drafter is not None:
            t += self.drafter_forward(spec.drafter, n_tokens, n_seqs, graph=False)
        return t


def kv_bytes_per_token(profile: Profile, tp: int, kv_cache_dtype: str) -> float:
    """KV-cache bytes one token occupies on one GPU."""
    m = profile.model
    per = m.kv_bytes_per_token if m.kv_replicated else m.kv_bytes_per_token / tp
    return per * KV_CACHE_DTYPE_SCALE.get(kv_cache_dtype, 1.0)


def graph_batch_sizes(max_bs: int, speculative: bool) -> tuple[int, ...]:
    """Decode batch sizes SGLang captures, up to ``max_bs``."""
    if max_bs <= 0:
        return ()
    if speculative:
        cand = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 161, 4)) + list(range(168, 4097, 8))
    else:
        cand = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 513, 16)) + list(range(544, 4097, 32))
    out = [b for b in cand if b <= max_bs]
    if out[-1] != max_bs:
        out.append(max_bs)
    return tuple(out)
