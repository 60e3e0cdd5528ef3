"""The simulated server as a real process: flags, launch failures, endpoints, streaming, meta_info."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.conftest import free_port

SERVER = [sys.executable, "-m", "autotune.sim.server"]
FAST = ["--sim-launch-speedup", "1000"]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
    env.update(extra or {})
    return env


@contextmanager
def running(*flags: str, env: dict[str, str] | None = None, timeout_s: float = 20.0) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*SERVER, *FAST, "--model-path", "m", "--host", "127.0.0.1", "--port", str(port), *flags],
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited {proc.returncode}: {proc.stdout.read() if proc.stdout else ''}")
            try:
                if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("server not ready in time")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _run_to_exit(*flags: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SERVER, *FAST, "--model-path", "m", "--port", str(free_port()), *flags],
        env=_env(env),
        capture_output=True,
        text=True,
        timeout=30,
    )


def _stream(url: str, body: dict) -> list[dict]:
    chunks = []
    with httpx.stream("POST", f"{url}/generate", json={**body, "stream": True}, timeout=30) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    for line in lines[:-1]:
        assert line.startswith("data: ")
        chunks.append(json.loads(line[len("data: ") :]))
    return chunks


def test_unknown_flag_is_rejected_like_argparse() -> None:
    res = _run_to_exit("--no-such-flag", "1")
    assert res.returncode == 2
    assert "unrecognized arguments: --no-such-flag" in res.stderr


def test_help_lists_sglang_and_sim_flags() -> None:
    res = subprocess.run([*SERVER, "--help"], env=_env(), capture_output=True, text=True, timeout=30)
    assert res.returncode == 0
    for flag in (
        "--tp-size",
        "--mem-fraction-static",
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-max-bs",
        "--speculative-num-draft-tokens",
        "--disable-custom-all-reduce",
        "--sim-time-scale",
    ):
        assert flag in res.stdout


def test_launch_failure_exits_one_with_sglang_message() -> None:
    res = _run_to_exit("--sim-profile", "kimi-k2.5-int4-8x-rtxpro6000", "--tp", "8", "--mem-fraction-static", "0.7")
    assert res.returncode == 1
    assert "Load weight end. elapsed=313.00 s" in res.stdout
    assert "ValueError: Loaded weights leave no GPU memory for the KV cache" in res.stdout


def test_global_nccl_tree_fails_graph_capture() -> None:
    res = _run_to_exit(
        "--sim-profile", "h200x2-llama-8b", "--tp", "2", "--disable-custom-all-reduce", env={"NCCL_ALGO": "Tree"}
    )
    assert res.returncode == 1
    assert "Capture cuda graph failed: NCCL error: invalid usage" in res.stdout


def test_generate_stream_server_info_and_metrics() -> None:
    with running("--sim-profile", "h200-llama-1b", "--sim-time-scale", "2", "--enable-metrics") as url:
        info = httpx.get(f"{url}/server_info").json()
        assert info["sim"]["simulated"] is True and info["sim"]["time_scale"] == 2.0
        assert info["sim"]["profile"] == "h200-llama-1b" and info["sim"]["gpu_count"] == 1
        assert info["max_total_num_tokens"] > 0 and info["internal_states"][0]["effective_max_running_requests_per_dp"]
        assert httpx.get(f"{url}/get_server_info").json()["version"]
        assert httpx.get(f"{url}/model_info").json()["model_path"] == "m"

        chunks = _stream(
            url, {"input_ids": list(range(100)), "sampling_params": {"max_new_tokens": 40, "ignore_eos": True}}
        )
        last = chunks[-1]
        assert last["meta_info"]["completion_tokens"] == 40 == len(last["output_ids"])
        assert last["meta_info"]["prompt_tokens"] == 100
        assert last["meta_info"]["finish_reason"] == {"type": "length", "length": 40}
        assert last["meta_info"]["e2e_latency"] > 0
        cts = [c["meta_info"]["completion_tokens"] for c in chunks]
        assert cts == sorted(cts) and cts[0] >= 1
        assert last["text"].startswith(chunks[0]["text"])

        whole = httpx.post(f"{url}/generate", json={"text": "hello " * 20, "sampling_params": {"max_new_tokens": 5}})
        assert whole.json()["meta_info"]["completion_tokens"] == 5

        comp = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 3}).json()
        assert comp["usage"]["completion_tokens"] == 3
        too_long = httpx.post(f"{url}/generate", json={"text": "x", "sampling_params": {"max_new_tokens": 10**7}})
        assert too_long.status_code == 400
        # a body that is not a JSON object: a 400 in each endpoint's own error shape
        native = httpx.post(f"{url}/generate", json=["hello"])
        assert native.status_code == 400 and "JSON object" in native.json()["error"]["message"]
        openai = httpx.post(f"{url}/v1/completions", json=["hello"])
        assert (
            openai.status_code == 400
            and openai.json()["object"] == "error"
            and "JSON object" in openai.json()["message"]
        )

        metrics = httpx.get(f"{url}/metrics").text
        assert "sglang:generation_tokens_total" in metrics and "sglang:num_running_reqs" in metrics


def test_speculative_meta_info_and_simulated_accept_length() -> None:
    flags = ("--sim-profile", "h200-llama-1b", "--speculative-algorithm", "EAGLE3")
    flags += ("--speculative-draft-model-path", "/tmp/models/eagle3-llama-1b", "--speculative-num-steps", "3")
    flags += ("--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
    with running(*flags, env={"SGLANG_SIMULATE_ACC_LEN": "3.0"}) as url:
        last = _stream(url, {"input_ids": [1] * 16, "sampling_params": {"max_new_tokens": 61}})[-1]["meta_info"]
        assert last["spec_verify_ct"] == 20  # first token from prefill, then 3 per verify step
        assert last["spec_accept_length"] == pytest.approx(61 / 20)
        assert "spec_accept_rate" in last
        info = httpx.get(f"{url}/server_info").json()
        assert info["max_running_requests"] == 48
        assert info["internal_states"][0]["avg_spec_accept_length"] == pytest.approx(3.0)
        assert httpx.post(f"{url}/flush_cache").status_code == 200


def test_openai_prompt_longer_than_kv_cache_is_refused_not_queued_forever() -> None:
    """A prompt the KV cache cannot hold would never be admitted and would block every request behind it."""
    with running("--sim-profile", "h200-llama-1b", "--max-total-tokens", "1000", "--sim-time-scale", "50") as url:
        for path, body in (
            ("/v1/completions", {"prompt": "x" * 4400, "max_tokens": 4}),
            ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x" * 4400}], "max_tokens": 4}),
        ):
            r = httpx.post(f"{url}{path}", json=body, timeout=10)
            assert r.status_code == 400 and "longer than the KV cache" in r.json()["message"], path
        ok = httpx.post(f"{url}/v1/completions", json={"prompt": "hi", "max_tokens": 4}, timeout=10)
        assert ok.json()["usage"]["completion_tokens"] == 4


def test_a_lone_request_is_clipped_to_the_kv_cache_as_sglang_does() -> None:
    """prompt + max_new_tokens beyond the KV cache: SGLang clips max_new_tokens to max_req_len - prompt - 1
    (max_req_len = KV tokens - 1), so the request never holds more KV than there is."""
    with running("--sim-profile", "h200-llama-1b", "--max-total-tokens", "1000", "--sim-time-scale", "50") as url:
        body = {"input_ids": [1] * 900, "sampling_params": {"max_new_tokens": 500}}
        meta = httpx.post(f"{url}/generate", json=body, timeout=10).json()["meta_info"]
        assert meta["completion_tokens"] == 98 and meta["finish_reason"] == {"type": "length", "length": 98}
        small = httpx.post(f"{url}/generate", json={"input_ids": [1] * 10, "sampling_params": {"max_new_tokens": 5}})
        assert small.json()["meta_info"]["completion_tokens"] == 5


def _gauge(url: str, name: str) -> float:
    line = next(x for x in httpx.get(f"{url}/metrics").text.splitlines() if x.startswith(f"sglang:{name}{{"))
    return float(line.split()[-1])


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_whose_client_went_away_is_aborted(stream: bool) -> None:
    """SGLang aborts a request whose client disconnected; the simulator kept it queued, then generated all of it."""
    with running("--sim-profile", "h200-llama-1b", "--max-running-requests", "1", "--sim-time-scale", "1") as url:
        with httpx.Client(timeout=30) as busy, httpx.Client(timeout=0.3) as impatient:
            with busy.stream(
                "POST",
                f"{url}/generate",
                json={"input_ids": [1] * 10, "stream": True, "sampling_params": {"max_new_tokens": 20000}},
            ):
                body = {"input_ids": [1] * 10, "stream": stream, "sampling_params": {"max_new_tokens": 4000}}
                with pytest.raises(httpx.ReadTimeout):
                    impatient.post(f"{url}/generate", json=body)
                deadline = time.monotonic() + 3  # the busy request runs ~25 s
                while _gauge(url, "num_queue_reqs") != 0:
                    assert time.monotonic() < deadline, "the abandoned request is still queued"
                    time.sleep(0.05)
