"""SGLang's model for the search policy (``autotune.engines.sglang_model``): what it reads of a point's flags."""

from __future__ import annotations

import pytest

from autotune.engines.memory import from_model_dir
from autotune.engines.sglang_model import SGLANG
from autotune.policy import fit
from autotune.sim.adapter import profile_sizes
from autotune.sim.profile import load_profile
from autotune.trial.records import FailureKind

# SGLang 0.5.17's spellings of "no decode CUDA graphs" (--disable-cuda-graph is the deprecated one)
GRAPHS_OFF = [
    {"disable-cuda-graph": True},
    {"disable-decode-cuda-graph": True},
    {"cuda-graph-backend-decode": "disabled"},
]


@pytest.mark.parametrize("off", GRAPHS_OFF)
def test_every_spelling_of_decode_graphs_off_is_read(off: dict[str, object]) -> None:
    """A point that turns decode graphs off captures none, whichever spelling it uses: a fraction that leaves too
    little room for the graphs is predicted to fit, not to fail at graph capture."""
    assert SGLANG.cuda_graphs({}) and SGLANG.cuda_graphs({"cuda-graph-backend-decode": "full"})
    assert not SGLANG.cuda_graphs(off)
    sizes = profile_sizes(load_profile("kimi-k2.5-int4-8x-rtxpro6000"))
    flags = {
        "mem-fraction-static": 0.92,
        "max-running-requests": 256,
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/models/public-k2-eagle3",
        "speculative-num-steps": 5,
        "speculative-eagle-topk": 4,
        "speculative-num-draft-tokens": 8,
    }
    assert fit.predict(sizes, flags, tp_size=8, model=SGLANG).failure is FailureKind.GRAPH_CAPTURE_FAILED
    assert fit.predict(sizes, {**flags, **off}, tp_size=8, model=SGLANG).fits


@pytest.mark.parametrize(
    ("dtype", "scale"), [("fp8_e4m3", 0.5), ("mxfp8", 0.516), ("nvfp4", 0.28), ("fp4_mx_block16", 0.28)]
)
def test_every_quantized_kv_cache_dtype_shrinks_a_token(dtype: str, scale: float) -> None:
    """SGLang 0.5.17's --kv-cache-dtype choices: a token takes the dtype's bits plus its block scales (fp4: 4 bits and an
    8-bit scale per 16 values; mxfp8: 8 bits and one per 32). A name read as 16-bit overstated every token of such a
    point, and the KV-cache correction learned from its launches then skewed the other points' predictions."""
    sizes = from_model_dir("/tmp/models/llama-1b", 143771 * 1024 * 1024)  # no such directory here: the dummy shape
    plain = SGLANG.kv_bytes_per_token(sizes, {}, tp_size=1)
    assert SGLANG.kv_bytes_per_token(sizes, {"kv-cache-dtype": dtype}, tp_size=1) == pytest.approx(plain * scale)


def test_an_ngram_verify_graph_holds_its_default_draft_tokens() -> None:
    """NGRAM without --speculative-num-draft-tokens verifies SGLang's default 12 draft tokens a request (as the simulator
    does): read as 0, its decode graphs were predicted 13 times smaller than they are."""
    ngram = {"speculative-algorithm": "NGRAM"}
    assert SGLANG.graph_tokens_per_request(ngram) == 13
    assert SGLANG.graph_tokens_per_request({**ngram, "speculative-num-draft-tokens": 8}) == 9
    assert SGLANG.graph_tokens_per_request({}) == 1
