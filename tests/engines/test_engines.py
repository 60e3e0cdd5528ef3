from __future__ import annotations

import sys

import pytest

from autotune.core.errors import UnknownFlagError
from autotune.core.trial import TrialConfig
from autotune.engines import get_engine
from autotune.engines.base import classify_failure, flags_in_help, flags_to_argv, key_error_line, parse_log_phases
from autotune.engines.preflight import check_argv
from autotune.trial.records import FailureKind

CFG = TrialConfig(
    model_path="/models/m",
    tp_size=2,
    flags={
        "speculative-algorithm": "EAGLE3",
        "speculative-num-steps": 3,
        "disable-custom-all-reduce": True,
        "enable-torch-compile": False,
        "page-size": None,
    },
    env={"NCCL_ALGO": "allreduce:ring"},
)


def test_flags_to_argv_switches_and_omissions() -> None:
    argv = flags_to_argv({"a": 1, "b": True, "c": False, "d": None, "e": "x y"})
    assert argv == ["--a", "1", "--b", "--e", "x y"]


def test_sglang_launch_spec_is_exact(site_multicast_off: dict[str, str]) -> None:
    spec = get_engine("sglang", python="python3").launch_spec(CFG, port=31000, nccl_port=31001)
    assert spec.argv == (
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/m",
        "--tp-size",
        "2",
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--disable-custom-all-reduce",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
        "--nccl-port",
        "31001",
    )
    assert spec.env["NCCL_ALGO"] == "allreduce:ring"
    assert {k: spec.env[k] for k in site_multicast_off} == site_multicast_off  # the site's variables are kept
    assert "OMP_NUM_THREADS" in spec.unset_env  # Ray's value is not inherited by the server
    assert spec.gpus == 2 and spec.base_url == "http://127.0.0.1:31000"


def test_trial_env_overrides_safe_defaults_and_keeps_omp() -> None:
    cfg = TrialConfig(model_path="m", tp_size=1, env={"OMP_NUM_THREADS": "8"})
    spec = get_engine("sglang").launch_spec(cfg, port=1)
    assert spec.env["OMP_NUM_THREADS"] == "8" and "OMP_NUM_THREADS" not in spec.unset_env


def test_sim_launch_spec_uses_same_flags() -> None:
    spec = get_engine("sim", profile="p", time_scale=10, python="py").launch_spec(CFG, port=5)
    assert spec.argv[:7] == ("py", "-m", "autotune.sim.server", "--sim-profile", "p", "--sim-time-scale", "10.0")
    real = get_engine("sglang", python="py").launch_spec(CFG, port=5)
    assert spec.argv[7:] == real.argv[3:]


def test_unknown_engine() -> None:
    with pytest.raises(ValueError, match="sglang"):
        get_engine("vllm")


HELP = """usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]
  --speculative-algorithm {EAGLE,EAGLE3,NGRAM}
  --cuda-graph-max-bs-decode CUDA_GRAPH_MAX_BS_DECODE
  --port PORT --host HOST --disable-custom-all-reduce
"""


def test_check_argv_accepts_known_and_translates_aliases() -> None:
    known = flags_in_help(HELP)
    assert {"model-path", "tp-size", "cuda-graph-max-bs-decode", "disable-custom-all-reduce"} <= known
    out = check_argv(
        ["--tp-size", "2", "--cuda-graph-max-bs", "64"],
        known,
        [("cuda-graph-max-bs", "cuda-graph-max-bs-decode")],
        release="sglang 0.5.23",
    )
    assert out == ["--tp-size", "2", "--cuda-graph-max-bs-decode", "64"]


def test_check_argv_rejects_unknown_with_suggestion() -> None:
    with pytest.raises(UnknownFlagError, match=r"--speculative-algo .*did you mean --speculative-algorithm"):
        check_argv(["--speculative-algo", "EAGLE"], flags_in_help(HELP), [], release="sglang 0.5.17")


LOG = """[2026-11-30 15:21:00] Load weight begin. avail mem=139.1 GB
[2026-11-30 15:21:01] Load weight end. elapsed=0.53 s, type=LlamaForCausalLM, dtype=torch.bfloat16, mem usage=2.3 GB.
[2026-11-30 15:21:01] Load weight end. elapsed=0.20 s, type=LlamaForCausalLMEagle3, dtype=torch.bfloat16
[2026-11-30 15:21:05] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 3569454, K size: 54.47 GB, V size: 54.47 GB
[2026-11-30 15:21:06] Capture cuda graph begin. This can take up to several minutes. avail mem=20.1 GB
[2026-11-30 15:21:09] Capture cuda graph end. Time elapsed: 3.21 s. mem usage=0.4 GB. avail mem=19.6 GB.
[2026-11-30 15:21:09] Capture target decode CUDA graph end. elapsed=2.34 s, mem usage=0.41 GB, avail mem=19.2 GB.
[2026-11-30 15:21:10] max_total_num_tokens=3569454, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=131072
[2026-11-30 15:22:16] The server is fired up and ready to roll!
"""


def test_parse_log_phases() -> None:
    ph = parse_log_phases(LOG)
    assert ph.weights_loaded_s == pytest.approx(0.73)  # target + draft
    assert ph.kv_cache_tokens == 3569454
    assert ph.graph_capture_s == pytest.approx(3.21 + 2.34)  # old and 0.5.17 formats
    assert ph.max_total_num_tokens == 3569454 and ph.max_running_requests == 48


def test_parse_log_phases_empty() -> None:
    ph = parse_log_phases("nothing here")
    assert ph.weights_loaded_s is None and ph.kv_cache_tokens is None


@pytest.mark.parametrize(
    ("tail", "ready", "kind"),
    [
        (
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            False,
            FailureKind.OOM_AT_LAUNCH,
        ),
        ("Exception: Capture cuda graph failed: CUDA out of memory", False, FailureKind.GRAPH_CAPTURE_FAILED),
        (
            "NCCL WARN Error : no algorithm/protocol available\nException: Capture cuda graph failed: NCCL error: "
            "invalid usage",
            False,
            FailureKind.NCCL_ERROR,
        ),
        ("launch_server.py: error: unrecognized arguments: --foo", False, FailureKind.UNKNOWN_FLAG),
        ("Segmentation fault", False, FailureKind.CRASHED_AT_LAUNCH),
        ("Segmentation fault", True, FailureKind.CRASHED_UNDER_LOAD),
    ],
)
def test_classify_failure(tail: str, ready: bool, kind: FailureKind) -> None:
    assert classify_failure(tail, ready=ready) is kind


def test_key_error_line_picks_the_reason_not_the_last_line() -> None:
    tail = """    raise ValueError(
ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.01.

[2026-11-30 17:07:12] Received sigquit from a child process. It usually means the child failed.
[2026-11-30 17:07:12] kill_process_tree called: parent_pid=6449, include_parent=True, pid=6449"""
    assert key_error_line(tail).startswith("ValueError: Loaded weights leave no GPU memory")
    assert key_error_line("just one line") == "just one line"
    assert key_error_line("") == ""


def test_python_defaults_to_current_interpreter() -> None:
    assert get_engine("sglang").launch_spec(CFG, port=1).argv[0] == sys.executable
