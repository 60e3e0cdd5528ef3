"""Will a point's server fit in GPU memory? A prediction before the launch, from sizes and flags (pure arithmetic).

The memory plan, per GPU (SGLang's; ``docs/search.md`` has the evidence behind it). The flags are read through the
engine's model (``autotune.engines.base.EngineModel``: the memory fraction, the drafter, the running cap, the
CUDA-graph ceiling and the KV bytes a token takes):

- the memory fraction of the GPU's memory holds the weights (target + drafter, split over tensor parallel; of the
  target only the layers of the GPU's pipeline stage, the fullest one under ``--pp-size``) and the KV cache. When the
  weights leave no room for the cache the launch fails: out of memory at launch (SGLang 0.5.17: "Loaded weights leave
  no GPU memory for the KV cache").
- The rest holds the CUDA context, NCCL buffers, prefill activations and the CUDA graphs of every decode batch size up
  to ``min(graph ceiling, running cap)`` (a verify graph holds draft tokens + 1 tokens a request). When it cannot,
  CUDA-graph capture fails. This check needs per-model activation and graph constants, known for simulator profiles
  only; for a real model directory only the static check is made.

Sizes come from the engine (``Engine.memory_sizes``: a simulator profile, or a model directory's ``config.json``,
``autotune.engines.memory``). A prediction that a launch proves wrong is reported by ``check`` so the study's log says
so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.engines.base import EngineModel
from autotune.engines.memory import GIB, Sizes
from autotune.trial.records import FailureKind


@dataclass(frozen=True)
class Prediction:
    fits: bool
    failure: FailureKind | None  # OOM_AT_LAUNCH or GRAPH_CAPTURE_FAILED when it does not fit
    reason: str
    kv_tokens: int | None = None  # the KV cache the launch would allocate (None when unknown)

    def as_attr(self) -> str:
        return "fits" if self.fits else f"{self.failure.value if self.failure else 'unknown'}: {self.reason}"


def predict(sizes: Sizes, flags: Mapping[str, Any], *, tp_size: int, model: EngineModel) -> Prediction:
    """Whether a server launched with ``flags`` (keyed without dashes, as ``TrialConfig.flags``) fits; ``model``
    reads the flags (``Engine.model``)."""
    frac = model.memory_fraction(flags) or sizes.default_mem_fraction
    if frac is None:
        return Prediction(True, None, f"{model.memory_fraction_flag} is {model.name}'s own choice here; not predicted")
    tp = max(int(tp_size), 1)
    drafter = sizes.drafter(model.drafter(flags))
    weights = sizes.weight_bytes / tp * model.stage_share(sizes, flags) + (drafter[0] / tp if drafter else 0.0)
    static = sizes.gpu_mem_bytes * frac
    kv_bytes = static - weights - sizes.preload_bytes
    per_token = model.kv_bytes_per_token(sizes, flags, tp_size=tp)
    if kv_bytes <= 0:
        return Prediction(
            False,
            FailureKind.OOM_AT_LAUNCH,
            f"--{model.memory_fraction_flag} {frac:g} gives {static / GIB:.2f} GiB per GPU for weights and KV cache; the weights "
            f"alone need {weights / GIB:.2f} GiB (+{sizes.preload_bytes / GIB:.1f} GiB already in use): no KV cache",
            0,
        )
    tokens = int(kv_bytes / per_token) if per_token > 0 else None
    if sizes.graph_bytes_per_bs > 0 and model.cuda_graphs(flags):
        mrr = model.running_cap(flags)
        graph_max = int(model.graph_ceiling(flags) or sizes.default_graph_max_bs or 0)
        if mrr is not None:
            graph_max = min(graph_max, mrr)
        per_bs = model.graph_tokens_per_request(flags)
        chunk = model.prefill_chunk(flags) or sizes.default_chunked_prefill
        need = (
            sizes.context_bytes
            + (sizes.comm_bytes if tp > 1 else 0.0)
            + sizes.activation_bytes_per_token * max(chunk, 1)
            + sizes.graph_bytes_per_bs * graph_max * per_bs
        )
        avail = sizes.gpu_mem_bytes * (1.0 - frac)
        if need > avail:
            return Prediction(
                False,
                FailureKind.GRAPH_CAPTURE_FAILED,
                f"outside the static pool {avail / GIB:.2f} GiB are left for the CUDA context, activations and CUDA "
                f"graphs up to batch {graph_max} ({per_bs} token(s) a request), which need {need / GIB:.2f} GiB",
                tokens,
            )
    return Prediction(True, None, "fits", tokens)


def check(prediction: Prediction, failure: FailureKind | None, launched_ok: bool) -> str | None:
    """A sentence when a launch contradicts the prediction, else None."""
    memory = (FailureKind.OOM_AT_LAUNCH, FailureKind.GRAPH_CAPTURE_FAILED)
    if prediction.fits and failure in memory:
        return f"predicted to fit, but the launch failed ({failure.value if failure else ''})"
    if not prediction.fits and launched_ok:
        return f"predicted not to fit ({prediction.reason}), but it launched"
    return None
