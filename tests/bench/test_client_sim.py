"""The client against the simulated SGLang server, started as a real process on a free port."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from autotune.bench.client import run_plan
from autotune.bench.types import BenchPlan, BenchResult, WorkloadSpec
from autotune.core.errors import BenchError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("autotune.sim.server") is None,
    reason="autotune.sim.server (the simulated engine) is missing",
)

TIME_SCALE = 10.0
READY_DEADLINE_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(*flags: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    argv = [sys.executable, "-m", "autotune.sim.server", "--sim-profile", "h200-llama-1b", "--model-path", "x"]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--sim-time-scale", str(TIME_SCALE), *flags]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_DEADLINE_S
    with httpx.Client(trust_env=False, timeout=2.0) as c:
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
                raise RuntimeError(f"sim server exited with {proc.returncode} before ready:\n{out[-2000:]}")
            try:
                if c.get(url + "/health").status_code == 200:
                    return proc, url
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                _stop(proc)
                raise RuntimeError(f"sim server not ready within {READY_DEADLINE_S} s")
            time.sleep(0.1)  # polling interval of a readiness loop, not synchronisation


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    if proc.stdout:
        proc.stdout.close()


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    proc, url = _start()
    try:
        yield url
    finally:
        _stop(proc)


def test_plan_on_the_sim_server(sim_url: str) -> None:
    spec = WorkloadSpec(input_len=64, output_len=32, vocab_size=32000)
    plan = BenchPlan(workload=spec, concurrencies=(1, 8), requests_per_level=8, warmup_requests=2)
    result = run_plan(sim_url, plan)
    assert result.time_scale == TIME_SCALE
    assert [lv.concurrency for lv in result.levels] == [1, 8]
    for lv in result.levels:
        assert 2 <= len(lv.windows) <= plan.max_windows and lv.stop_reason in ("precision", "max_windows")
        assert all((w.requests, w.failed) == (8, 0) for w in lv.windows), lv.errors
        assert (lv.requests, lv.failed) == (8 * len(lv.windows), 0)
        tput = lv.intervals["output_tok_per_s"]
        assert tput.n == len(lv.windows) and tput.mean == pytest.approx(lv.output_tok_per_s)
        assert tput.low is not None and tput.high is not None and tput.low <= tput.mean <= tput.high
        assert lv.input_tok_per_s == pytest.approx(lv.output_tok_per_s * 64 / 32)  # exact lengths, no EOS
        assert lv.ttft_ms is not None and lv.itl_ms is not None and lv.tpot_ms is not None and lv.e2e_ms is not None
        assert 0 < lv.ttft_ms.median < lv.e2e_ms.median
        assert lv.itl_ms.count <= lv.requests * 31
        # e2e = ttft + (tokens - 1) x tpot for every request, hence for the means too
        assert lv.e2e_ms.mean == pytest.approx(lv.ttft_ms.mean + 31 * lv.tpot_ms.mean, rel=1e-6)
        assert lv.accept_length is None
    assert result.level(8).output_tok_per_s > 2 * result.level(1).output_tok_per_s  # batching pays off


def test_speculative_accept_length_on_the_sim_server() -> None:
    flags = ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-num-steps", "3"]
    flags += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
    proc, url = _start(*flags, env={"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    try:
        spec = WorkloadSpec(input_len=32, output_len=64, vocab_size=32000)
        result = run_plan(url, BenchPlan(workload=spec, concurrencies=(4,), requests_per_level=8, warmup_requests=1))
    finally:
        _stop(proc)
    lv = result.level(4)
    assert lv.failed == 0 and lv.accept_length is not None and result.server_accept_length is not None
    assert 2.0 < lv.accept_length < 4.0
    assert 2.0 < result.server_accept_length < 4.0


def test_killed_server_is_a_bench_error() -> None:
    proc, url = _start()
    _stop(proc)
    plan = BenchPlan(workload=WorkloadSpec(input_len=8, output_len=8), concurrencies=(1,), warmup_requests=1)
    with pytest.raises(BenchError, match="server is not running / crashed"):
        run_plan(url, plan)


def test_plan_in_a_client_subprocess(sim_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica's way: the client in a process of its own, pinned to a CPU set, progress relayed, env cleaned."""
    import asyncio

    from autotune.bench.subproc import arun_plan_in_subprocess, clean_env

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as Ray sets it in a replica
    assert "OMP_NUM_THREADS" not in clean_env() and clean_env()["PATH"] == os.environ["PATH"]
    levels: list[tuple[int, int, int]] = []
    cpus = sorted(os.sched_getaffinity(0))[:1]
    plan = BenchPlan(
        workload=WorkloadSpec(input_len=16, output_len=8),
        concurrencies=(1, 2),
        requests_per_level=4,
        warmup_requests=1,
        max_windows=2,
    )
    result = asyncio.run(arun_plan_in_subprocess(sim_url, plan, cpus=cpus, on_level=lambda *a: levels.append(a)))
    assert [lv.concurrency for lv in result.levels] == [1, 2] and result.level_order == (1, 2)
    assert levels == [(1, 2, 1), (2, 2, 2)]
    assert result.cache_flushes == 2 and all(len(lv.windows) == 2 for lv in result.levels)
    assert not any("affinity" in n for n in result.notes), result.notes


def test_client_subprocess_reports_a_dead_server() -> None:
    import asyncio

    from autotune.bench.subproc import arun_plan_in_subprocess

    plan = BenchPlan(workload=WorkloadSpec(input_len=8, output_len=8), concurrencies=(1,), warmup_requests=1)
    with pytest.raises(BenchError, match="server is not running / crashed"):
        asyncio.run(arun_plan_in_subprocess(f"http://127.0.0.1:{_free_port()}", plan))


def _greedy_plan() -> BenchPlan:
    spec = WorkloadSpec(input_len=32, output_len=24, seed=3, vocab_size=32000)
    return BenchPlan(
        workload=spec,
        concurrencies=(1, 4),
        requests_per_level=8,
        warmup_requests=1,
        greedy_prompts=4,
        greedy_max_new_tokens=12,
    )


def test_greedy_sample_and_per_level_server_accept_length() -> None:
    """Each level's /server_info accept length covers that level alone (counters zeroed by /set_internal_state)."""
    proc, url = _start(
        "--speculative-algorithm",
        "NGRAM",
        "--speculative-num-draft-tokens",
        "4",
        "--speculative-ngram-max-bfs-breadth",
        "1",
    )
    try:
        result = run_plan(url, _greedy_plan())
    finally:
        _stop(proc)
    assert result.greedy is not None and not result.greedy.errors
    assert [len(o) for o in result.greedy.outputs] == [12, 12, 12, 12]
    for lv in result.levels:
        assert lv.server_accept_length is not None and lv.accept_length is not None
        assert abs(lv.server_accept_length - lv.accept_length) < 0.5
    assert not any("set_internal_state" in n for n in result.notes)


NGRAM = ("--speculative-algorithm", "NGRAM")
FAULT = {"AUTOTUNE_SIM_FAULT": "spec-corrupt-output"}


@pytest.fixture(scope="module")
def fault_runs() -> dict[str, BenchResult]:
    """The greedy plan measured once on each of four servers (plain or NGRAM, with or without the fault mode); the
    two tests below judge the same runs."""
    runs = {}
    for name, flags, env in (
        ("plain", (), None),
        ("plain-fault", (), FAULT),
        ("spec", NGRAM, None),
        ("spec-fault", NGRAM, FAULT),
    ):
        proc, url = _start(*flags, env=env)
        try:
            runs[name] = run_plan(url, _greedy_plan())
        finally:
            _stop(proc)
    return runs


@pytest.mark.xdist_group("client-sim-fault")  # one worker measures fault_runs once for both tests
def test_the_fault_mode_corrupts_outputs_only_under_speculation(fault_runs: dict[str, BenchResult]) -> None:
    """AUTOTUNE_SIM_FAULT=spec-corrupt-output: a speculative server's greedy outputs differ from a plain one's."""
    samples = [fault_runs[name].greedy for name in ("plain", "plain-fault", "spec", "spec-fault")]
    assert all(s is not None for s in samples)
    plain, plain_fault, spec, spec_fault = (s.outputs for s in samples if s is not None)
    assert plain == plain_fault == spec  # the fault leaves a plain server alone; correct speculation is lossless
    assert spec_fault != plain
    assert all(a[:4] == b[:4] and a[4] != b[4] for a, b in zip(plain, spec_fault, strict=True))


@pytest.mark.xdist_group("client-sim-fault")
def test_the_output_gate_catches_the_fault_mode_and_passes_correct_speculation(
    fault_runs: dict[str, BenchResult],
) -> None:
    """End to end on the simulator: greedy samples measured from real sim servers, judged by the export's gate."""
    from dataclasses import replace

    from autotune.export.output_gate import FAILED, PASSED, output_gate
    from tests.export.conftest import make_record

    runs = {"plain": fault_runs["plain"], "spec": fault_runs["spec"], "faulty": fault_runs["spec-fault"]}
    fl = {"speculative-algorithm": "NGRAM"}
    records = [
        replace(make_record(0, tputs={1: 10.0, 4: 30.0}), bench=runs["plain"]),
        replace(make_record(1, tputs={1: 10.0, 4: 30.0}, flags=fl), bench=runs["spec"]),
        replace(make_record(2, tputs={1: 10.0, 4: 30.0}, flags=fl), bench=runs["faulty"]),
    ]
    assert output_gate(records[1], records).status == PASSED
    bad = output_gate(records[2], records)
    assert bad.status == FAILED and bad.identical == 0
    assert {d.first_diff_at for d in bad.differences} == {4}
