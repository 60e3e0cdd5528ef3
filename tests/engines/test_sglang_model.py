"""SGLang's model for the search policy (``autotune.engines.sglang_model``): what it reads of a point's flags."""

from __future__ import annotations

import pytest

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
