"""The trial runner against a fake replica: every branch of a trial, no Ray, no server, in milliseconds."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from autotune.bench.types import BenchPlan, BenchResult, Dist, LevelSummary
from autotune.core.errors import ReplicaError
from autotune.core.failures import FailureKind
from autotune.export.banner import study_banner
from autotune.progress.events import Phase, TrialEvent
from autotune.space import load_study
from autotune.study.runner import run_trial
from autotune.trial.records import TrialOutcome, TrialRecord
from autotune.trial.replica import BenchRun, Deployed, DeployRequest, Failure, Ready, ServerReport, Teardown

ROOT = Path(__file__).resolve().parents[2]
PARAMS = {"mem_fraction_static": 0.8, "max_running_requests": 16}
LOG = (
    "[2026-12-01 10:00:01] Load weight end. elapsed=1.50 s, type=LlamaForCausalLM\n"
    "[2026-12-01 10:00:02] KV Cache is allocated. #tokens: 123456, K size: 1 GB\n"
    "[2026-12-01 10:00:03] Capture cuda graph end. Time elapsed: 2.25 s\n"
    "[2026-12-01 10:00:03] max_total_num_tokens=123456, max_running_requests=16\n"
)


def result(tput: float = 3200.0) -> BenchResult:
    d = Dist(mean=10.0, median=9.0, p90=20.0, p99=30.0, count=10)
    levels = tuple(LevelSummary(c, 10, 0, 1.0, tput * c / 32, 2.0, 3.0, d, d, d, d, None) for c in (1, 8, 32))
    return BenchResult(levels=levels, time_scale=10.0)


@dataclass
class FakeReplica:
    """A ``Replica`` whose answers (or exceptions) the test sets; it records the calls it got."""

    ready: Ready | Failure | Exception = field(default_factory=lambda: Ready(ready_s=4.0))
    bench: BenchRun | Exception = field(
        default_factory=lambda: BenchRun(ok=True, alive=True, bench_s=2.0, result=result())
    )
    report: ServerReport | Exception = field(
        default_factory=lambda: ServerReport(
            argv=("python", "-m", "autotune.sim.server", "--port", "41234"),
            env={"NCCL_NVLS_ENABLE": "0"},
            unset_env=("OMP_NUM_THREADS",),
            node="node-a",
            release="autotune-sim 0.1.0",
            server_info={"sim": {"gpu_name": "H200", "gpu_count": 1, "time_scale": 10.0}},
            log_text=LOG,
            ready_s=4.0,
            init_epoch=1000.5,
            preflight_s=0.2,
            gpu_wait_s=0.1,
            replica_pid=7,
            launches=3,
        )
    )
    teardown: Teardown | Exception = field(default_factory=lambda: Teardown(teardown_s=0.01, deferred=True))
    calls: list[str] = field(default_factory=list)

    def _answer(self, name: str, value: Any) -> Any:
        self.calls.append(name)
        if isinstance(value, Exception):
            raise value
        return value

    def wait_ready(self, expected: str | None = None) -> Ready | Failure:
        return self._answer("wait_ready", self.ready)

    def benchmark(self, plan: BenchPlan) -> BenchRun:
        assert isinstance(plan, BenchPlan)
        return self._answer("benchmark", self.bench)

    def info(self) -> ServerReport:
        return self._answer("info", self.report)

    def stop_server(self, *, defer: bool = False) -> Teardown:
        assert defer, "the runner defers the server's exit"
        return self._answer("stop_server", self.teardown)


@dataclass
class FakeDeployer:
    replica: FakeReplica = field(default_factory=FakeReplica)
    error: Exception | None = None
    release_error: str = ""
    requests: list[DeployRequest] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    def deploy(self, request: DeployRequest) -> Deployed:
        self.requests.append(request)
        if self.error is not None:
            raise self.error
        return Deployed(replica=self.replica, app="smoke-slot-0", serve_run_s=0.3, deploy_epoch=1000.0)

    def release(self, deployed: Deployed) -> str:
        self.released.append(deployed.app)
        return self.release_error


@pytest.fixture(scope="module")
def spec():  # type: ignore[no-untyped-def]
    return load_study(ROOT / "search_spaces" / "smoke.yaml")


def trial(
    spec,
    deployer: FakeDeployer,
    params: dict[str, Any] | None = None,  # type: ignore[no-untyped-def]
    events: list[TrialEvent] | None = None,
) -> tuple[TrialRecord, str]:
    sink = events if events is not None else []
    record, log_text = run_trial(
        spec, params or PARAMS, trial_id="abc", number=4, owner="own", deployer=deployer, send=sink.append
    )
    TrialRecord.from_json(record.to_json())  # every record the runner returns survives the store's round trip
    return record, log_text


def test_success_assembles_a_complete_record(spec) -> None:  # type: ignore[no-untyped-def]
    d = FakeDeployer()
    events: list[TrialEvent] = []
    record, log_text = trial(spec, d, events=events)
    assert [e.phase for e in events] == [Phase.STARTED, Phase.LAUNCHING, Phase.READY, Phase.TEARING_DOWN, Phase.ENDED]
    assert {(e.number, e.trial_id) for e in events} == {(4, "abc")} and events[0].params == PARAMS
    assert record.outcome is TrialOutcome.COMPLETE and record.failure is None and record.feasible
    assert record.objectives == {"output_tok_per_s@max": 3200.0}
    assert record.argv[-1] == "41234" and record.unset_env == ["OMP_NUM_THREADS"]
    assert record.engine is not None and record.engine.simulated and record.engine.gpu_name == "SIMULATED H200"
    assert record.engine.serve_app == "smoke-slot-0" and record.engine.replica_launches == 3
    p = record.phases
    assert (p.weights_loaded_s, p.kv_cache_tokens, p.graph_capture_s, p.max_running_requests) == (1.5, 123456, 2.25, 16)
    assert (p.launch_to_ready_s, p.bench_s, p.serve_run_s, p.preflight_s, p.gpu_wait_s) == (4.0, 2.0, 0.3, 0.2, 0.1)
    assert p.replica_start_s == pytest.approx(0.5)
    assert log_text == LOG
    assert d.replica.calls == ["wait_ready", "benchmark", "info", "stop_server"] and d.released == ["smoke-slot-0"]
    req = d.requests[0]
    assert req.name == "trial-004-abc" and req.owner == "own" and req.launch.unset_env == ("OMP_NUM_THREADS",)
    assert (req.number, req.trial_id) == (4, "abc")


def test_every_run_ends_with_an_ended_event(spec) -> None:  # type: ignore[no-untyped-def]
    # a point rejected before any launch, and a deploy that raised: the run still says it no longer runs
    no_drafter = replace(
        spec, server=spec.server.model_copy(update={"flags": {**spec.server.flags, "speculative-algorithm": "EAGLE3"}})
    )
    for spec_, deployer in ((no_drafter, FakeDeployer()), (spec, FakeDeployer(error=ReplicaError("boom")))):
        events: list[TrialEvent] = []
        record, _ = trial(spec_, deployer, events=events)
        assert record.outcome is not TrialOutcome.COMPLETE
        assert events[0].phase is Phase.STARTED and events[-1].phase is Phase.ENDED, events
        assert {(e.number, e.trial_id) for e in events} == {(4, "abc")}


def test_invalid_point_is_recorded_without_a_deploy(spec) -> None:  # type: ignore[no-untyped-def]
    no_drafter = replace(
        spec, server=spec.server.model_copy(update={"flags": {**spec.server.flags, "speculative-algorithm": "EAGLE3"}})
    )
    d = FakeDeployer()
    record, log_text = trial(no_drafter, d)
    assert record.outcome is TrialOutcome.INVALID and record.failure is FailureKind.INVALID_CONFIG
    assert "needs --speculative-draft-model-path" in record.message and not record.feasible and log_text == ""
    assert d.requests == []


def test_deploy_error_is_recorded(spec) -> None:  # type: ignore[no-untyped-def]
    d = FakeDeployer(error=ReplicaError("Ray Serve could not deploy smoke-slot-0: RuntimeError: boom"))
    record, _ = trial(spec, d)
    assert record.failure is FailureKind.DEPLOY_ERROR and "boom" in record.message
    assert record.unset_env == ["OMP_NUM_THREADS"]  # known from the launch spec before any deploy
    assert d.replica.calls == []


@pytest.mark.parametrize(
    "failure",
    [
        Failure(FailureKind.OOM_AT_LAUNCH, "not enough memory", "CUDA out of memory"),
        Failure(FailureKind.UNKNOWN_FLAG, "does not know --x", flags=("x",)),
        Failure(FailureKind.HELP_TIMEOUT, "--help did not finish"),
    ],
)
def test_launch_failure_keeps_its_kind_and_flags(spec, failure: Failure) -> None:  # type: ignore[no-untyped-def]
    d = FakeDeployer(FakeReplica(ready=failure))
    record, _ = trial(spec, d)
    assert record.outcome is TrialOutcome.FAILED and record.failure is failure.kind
    assert record.message.startswith(failure.message) and record.rejected_flags == list(failure.flags)
    assert record.log_tail == (failure.log_tail or "\n".join(LOG.splitlines()))  # no tail given: the log's
    assert d.replica.calls == ["wait_ready", "info", "stop_server"], "no benchmark, but always a teardown"
    assert record.phases.launch_to_ready_s is None and record.bench is None


def test_a_simulated_launch_failure_names_the_profile_hardware_so_the_study_is_not_mixed(spec) -> None:  # type: ignore[no-untyped-def]
    # what the simulator's /server_info says once it runs (autotune.sim.server), and a server that never answered
    running = replace(
        FakeReplica().report, server_info={"sim": {"gpu_name": "NVIDIA H200", "gpu_count": 1, "time_scale": 10.0}}
    )
    ok, _ = trial(spec, FakeDeployer(FakeReplica(report=running)))
    failed, _ = trial(
        spec,
        FakeDeployer(
            FakeReplica(
                ready=Failure(FailureKind.OOM_AT_LAUNCH, "no KV room"), report=replace(running, server_info=None)
            )
        ),
    )
    assert ok.outcome is TrialOutcome.COMPLETE and failed.failure is FailureKind.OOM_AT_LAUNCH
    assert failed.engine == ok.engine, "a failed launch of the same engine names other hardware"
    assert study_banner([ok, failed]).startswith("Engine: SIMULATED (profile h200-llama-1b)")


def test_crash_under_load_keeps_the_partial_result(spec) -> None:  # type: ignore[no-untyped-def]
    d = FakeDeployer(FakeReplica(bench=BenchRun(ok=True, alive=False, bench_s=1.0, result=result())))
    record, _ = trial(spec, d)
    assert record.failure is FailureKind.CRASHED_UNDER_LOAD and record.bench is not None and not record.feasible


def test_a_dead_server_after_a_failed_benchmark_is_classified_from_its_log(spec) -> None:  # type: ignore[no-untyped-def]
    bench = BenchRun(
        ok=False,
        alive=False,
        bench_s=1.0,
        message="requests failed",
        log_tail="torch.OutOfMemoryError: CUDA out of memory",
    )
    record, _ = trial(spec, FakeDeployer(FakeReplica(bench=bench)))
    assert record.failure is FailureKind.OOM_AT_LAUNCH and "CUDA out of memory" in record.log_tail
    bench = replace(bench, log_tail="Segmentation fault")
    record, _ = trial(spec, FakeDeployer(FakeReplica(bench=bench)))
    assert record.failure is FailureKind.CRASHED_UNDER_LOAD


def test_bench_error_against_a_live_server(spec) -> None:  # type: ignore[no-untyped-def]
    bench = BenchRun(ok=False, alive=True, bench_s=1.0, message="every request answered 500")
    record, _ = trial(spec, FakeDeployer(FakeReplica(bench=bench)))
    assert record.failure is FailureKind.BENCH_ERROR and "answered 500" in record.message


@pytest.mark.parametrize("where", ["ready", "bench", "report"])
def test_a_dead_replica_is_a_deploy_error_and_the_server_is_still_stopped(spec, where: str) -> None:  # type: ignore[no-untyped-def]
    replica = FakeReplica(**{where: ReplicaError("the replica's wait_ready call failed: RayActorError: died")})
    record, log_text = trial(spec, FakeDeployer(replica))
    assert record.failure is FailureKind.DEPLOY_ERROR and "RayActorError" in record.message
    assert replica.calls[-1] == "stop_server" and log_text == ""


def test_an_unexpected_exception_is_recorded_not_raised(spec) -> None:  # type: ignore[no-untyped-def]
    record, _ = trial(spec, FakeDeployer(FakeReplica(ready=KeyError("surprise"))))
    assert record.failure is FailureKind.UNKNOWN and "KeyError" in record.message


def test_teardown_and_release_errors_are_noted_on_a_complete_trial(spec) -> None:  # type: ignore[no-untyped-def]
    d = FakeDeployer(FakeReplica(teardown=ReplicaError("stop_server timed out")), release_error="delete failed")
    record, _ = trial(spec, d)
    assert record.outcome is TrialOutcome.COMPLETE
    assert (
        "teardown: ReplicaError: stop_server timed out" in record.message and "release: delete failed" in record.message
    )


def test_the_boundary_records_pickle_as_they_are() -> None:
    for value in (
        Ready(1.0),
        Failure(FailureKind.INVALID_VALUE, "m", "t", ("x",)),
        BenchRun(ok=True, alive=True, bench_s=1.0, result=result()),
        FakeReplica().report,
        Teardown(),
    ):
        assert pickle.loads(pickle.dumps(value)) == value


def test_the_benchmark_wait_covers_every_window_of_every_level(spec) -> None:  # type: ignore[no-untyped-def]
    """``level_timeout_s`` limits one window, not the benchmark: 4 levels of 5 windows each within their 2.5 s limit
    ran about 20 s, and the runner gave up after 4 x 2.5 s, recording a healthy trial as a deploy_error."""
    pytest.importorskip("ray")
    from autotune.study.runner import bench_wait_s, serve_deployer

    plan = replace(spec.plan, concurrencies=(1, 2, 3, 4), level_timeout_s=2.5, min_windows=5, max_windows=5)
    assert bench_wait_s(plan) >= 4 * (5 + 1) * 2.5 + 4 * 30  # warmup and windows at their limit, the flushes
    longer = replace(plan, max_windows=10, greedy_prompts=3)
    assert bench_wait_s(longer) >= bench_wait_s(plan) + 4 * 5 * 2.5 + 3 * plan.request_timeout_s
    assert serve_deployer(replace(spec, plan=plan)).bench_wait_s == bench_wait_s(plan)  # type: ignore[attr-defined]
