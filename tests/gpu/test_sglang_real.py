"""Real SGLang on a real GPU, through autotune's engine adapter, preflight, launcher and benchmark client.

Three launches (about 60-120 s each on an H200 with a warm Triton cache) plus one ``--help`` (20-40 s, cached):

1. llama-1b, the device recipe's flags: phases parsed from the log, a streamed benchmark, ``/server_info``, teardown
   frees the GPU. An unknown flag is rejected by preflight before any launch.
2. llama-8b with ``--mem-fraction-static 0.05``: its 16 GB of weights exceed the 7 GB static budget, so the launch fails
   and is classified OOM_AT_LAUNCH. (llama-1b would still start at 0.05: 2.5 GB of weights leave about 4 GB of KV.)
3. llama-1b + EAGLE-3 dummy drafter with ``SGLANG_SIMULATE_ACC_LEN=3.0``: accept length about 3 in the benchmark, and
   the speculative cap of 48 running requests in the log.

The tests run in file order; the base server is stopped by ``test_teardown_frees_the_gpu`` before the other launches.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from autotune.bench.client import run_plan
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.errors import LaunchError, UnknownFlagError
from autotune.core.gpus import memory_used_mib
from autotune.core.trial import FlagValue, LaunchSpec, TrialConfig
from autotune.engines import get_engine
from autotune.engines.base import parse_log_phases
from autotune.engines.preflight import preflight
from autotune.engines.sglang import installed_sglang_version
from autotune.trial.launcher import ServerProcess, launched, wait_gpus_free
from autotune.trial.records import FailureKind

pytestmark = pytest.mark.gpu

# The lent H200's slimmed wheel set has no FA3 kernels and no flashinfer sampler: triton attention, pytorch sampling.
BASE_FLAGS: Mapping[str, FlagValue] = {
    "load-format": "dummy",
    "attention-backend": "triton",
    "sampling-backend": "pytorch",
    "mem-fraction-static": 0.8,
    "cuda-graph-max-bs-decode": 32,
}
VOCAB = 128256
LAUNCH_TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def checked_spec(
    model: Path, flags: Mapping[str, FlagValue] | None = None, env: Mapping[str, str] | None = None
) -> LaunchSpec:
    """The engine's LaunchSpec for ``model`` with the base flags (+ ``flags``), checked against the installed --help."""
    engine = get_engine("sglang")
    cfg = TrialConfig(model_path=str(model), tp_size=1, flags={**BASE_FLAGS, **(flags or {})}, env=dict(env or {}))
    spec = engine.launch_spec(cfg, port=free_port(), nccl_port=free_port(), ready_timeout_s=LAUNCH_TIMEOUT_S)
    return preflight(engine, spec, release=engine.release())


def plan(concurrencies: tuple[int, ...], output_len: int, requests: int) -> BenchPlan:
    workload = WorkloadSpec(input_len=128, output_len=output_len, vocab_size=VOCAB, seed=7)
    return BenchPlan(workload=workload, concurrencies=concurrencies, requests_per_level=requests, warmup_requests=1)


def assert_gpus_free() -> None:
    waited = wait_gpus_free(timeout_s=60)
    assert waited is not None, "nvidia-smi answered before the tests but not now"
    used = memory_used_mib() or {}
    assert all(mib < 1024 for mib in used.values()), f"GPU memory still in use after teardown: {used} MiB"


@pytest.fixture(scope="module")
def base_server(dummy_models: Path, server_logs: Path) -> Iterator[ServerProcess]:
    spec = checked_spec(dummy_models / "llama-1b")
    with launched(spec, server_logs / "base.log") as server:
        yield server


@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)
def test_base_launch_phases_parsed_from_the_log(base_server: ServerProcess) -> None:
    assert base_server.ready_at is not None
    ready_s = base_server.ready_at - base_server.started_at
    assert 5 < ready_s < LAUNCH_TIMEOUT_S
    assert "--cuda-graph-max-bs-decode" in base_server.spec.argv  # the installed release knows the recipe's flag
    phases = parse_log_phases(base_server.log_path.read_text(errors="replace"))
    assert phases.weights_loaded_s is not None, "no 'Load weight end. elapsed=...' line parsed"
    assert phases.kv_cache_tokens and phases.kv_cache_tokens > 100_000, phases
    assert phases.max_total_num_tokens and phases.max_total_num_tokens > 100_000, phases
    assert phases.max_running_requests and phases.max_running_requests > 0, phases
    # 0.5.17 logs 'Capture target decode CUDA graph end. elapsed=1.33 s, ...' (and 'target prefill' before it)
    assert phases.graph_capture_s is not None, "no CUDA-graph capture time parsed from the log"


@pytest.mark.timeout(300)
def test_streamed_generate_through_the_benchmark_client(base_server: ServerProcess) -> None:
    result = run_plan(base_server.base_url, plan((1, 4), output_len=64, requests=4))
    for lv in result.levels:
        assert lv.failed == 0 and lv.requests == 4, lv.errors
        assert lv.output_tok_per_s > 0 and lv.ttft_ms is not None and lv.tpot_ms is not None
        assert lv.ttft_ms.median > 0 and lv.tpot_ms.median > 0
        assert lv.output_tok_per_s * lv.duration_s == pytest.approx(4 * 64, rel=0.01)  # ignore_eos: every token
        assert lv.accept_length is None  # no speculation
    assert result.time_scale == 1.0


@pytest.mark.timeout(120)
def test_server_info_endpoint(base_server: ServerProcess) -> None:
    with httpx.Client(base_url=base_server.base_url, timeout=30, trust_env=False) as client:
        resp = client.get("/server_info")
        if resp.status_code != 200:  # older releases
            resp = client.get("/get_server_info")
    assert resp.status_code == 200, resp.text[:300]
    info = resp.json()
    assert str(info.get("version", "")) == installed_sglang_version()
    phases = parse_log_phases(base_server.log_path.read_text(errors="replace"))
    if "max_total_num_tokens" in info:
        assert info["max_total_num_tokens"] == phases.max_total_num_tokens


@pytest.mark.timeout(300)
def test_unknown_flag_is_rejected_before_launch(dummy_models: Path) -> None:
    t0 = time.monotonic()
    with pytest.raises(UnknownFlagError, match="--no-such-flag"):
        checked_spec(dummy_models / "llama-1b", {"no-such-flag": 1})
    assert time.monotonic() - t0 < 60  # the --help text is cached: nothing was launched


@pytest.mark.timeout(180)
def test_teardown_frees_the_gpu(base_server: ServerProcess) -> None:
    stop_s = base_server.stop()
    assert not base_server.alive()
    assert stop_s < 60
    assert_gpus_free()


@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 120)
def test_too_small_mem_fraction_fails_as_oom_at_launch(dummy_models: Path, server_logs: Path) -> None:
    assert_gpus_free()
    spec = checked_spec(dummy_models / "llama-8b", {"mem-fraction-static": 0.05})
    with pytest.raises(LaunchError) as exc:
        with launched(spec, server_logs / "oom.log"):
            pytest.fail("a server with mem-fraction-static 0.05 and 16 GB of weights must not become ready")
    assert exc.value.kind is FailureKind.OOM_AT_LAUNCH, exc.value.log_tail[-2000:]
    assert "mem-fraction-static" in exc.value.log_tail
    assert_gpus_free()


@pytest.mark.timeout(LAUNCH_TIMEOUT_S + 300)
def test_eagle3_with_simulated_accept_length(dummy_models: Path, server_logs: Path) -> None:
    assert_gpus_free()
    flags: dict[str, FlagValue] = {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(dummy_models / "eagle3-llama-1b"),
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
        "speculative-num-draft-tokens": 4,
        "disable-prefill-cuda-graph": True,  # shorter launch; the prefill graph is not what this test is about
    }
    spec = checked_spec(dummy_models / "llama-1b", flags, {"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    assert spec.env["SGLANG_SIMULATE_ACC_LEN"] == "3.0"
    with launched(spec, server_logs / "eagle3.log") as server:
        result = run_plan(server.base_url, plan((1, 8), output_len=128, requests=8))
        phases = parse_log_phases(server.log_path.read_text(errors="replace"))
    for lv in result.levels:
        assert lv.failed == 0, lv.errors
        assert lv.accept_length == pytest.approx(3.0, abs=0.3), f"level {lv.concurrency}: {lv.accept_length}"
    if result.server_accept_length is not None:  # /server_info's average, updated every 40 decode steps
        assert result.server_accept_length == pytest.approx(3.0, abs=0.3)
    assert phases.max_running_requests == 48, "speculative decoding caps max_running_requests at 48 when unset"
    assert_gpus_free()
