"""The Serve handle adapter: typed answers pass through, Ray's exceptions become ReplicaError (DEPLOY_ERROR)."""

from __future__ import annotations

from typing import Any

import pytest
from ray.exceptions import GetTimeoutError, RayActorError
from ray.serve.exceptions import RayServeException

from autotune.core.errors import ReplicaError, failure_kind
from autotune.core.failures import FailureKind
from autotune.serve.handle import ServeReplica
from autotune.trial.replica import Ready, Teardown


class _Method:
    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.args: tuple[Any, ...] = ()
        self.timeout_s: float | None = None

    def remote(self, *args: Any, **kwargs: Any) -> _Method:
        self.args = (*args, *kwargs.items())
        return self

    def result(self, timeout_s: float) -> Any:
        self.timeout_s = timeout_s
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


class _Handle:
    def __init__(self, **answers: Any) -> None:
        for name, answer in answers.items():
            setattr(self, name, _Method(answer))


def test_answers_pass_through_with_their_timeouts() -> None:
    handle = _Handle(wait_ready=Ready(2.0), stop_server=Teardown(deferred=True))
    replica = ServeReplica(handle, ready_wait_s=11.0, bench_wait_s=22.0)
    assert replica.wait_ready("trial-1") == Ready(2.0) and handle.wait_ready.timeout_s == 11.0
    assert handle.wait_ready.args == ("trial-1",)
    assert replica.stop_server(defer=True).deferred and handle.stop_server.args == (("defer", True),)


@pytest.mark.parametrize(
    "exc",
    [
        RayActorError(),
        GetTimeoutError("get timed out"),
        RayServeException("gone"),
        RuntimeError("Deploying application x failed"),
    ],
)
def test_ray_errors_become_replica_errors(exc: BaseException) -> None:
    replica = ServeReplica(_Handle(info=exc), ready_wait_s=1.0, bench_wait_s=1.0)
    with pytest.raises(ReplicaError, match="the replica's info call failed") as info:
        replica.info()
    assert info.value.__cause__ is exc and failure_kind(info.value) is FailureKind.DEPLOY_ERROR


def test_other_errors_are_not_swallowed() -> None:
    replica = ServeReplica(_Handle(info=KeyError("bug")), ready_wait_s=1.0, bench_wait_s=1.0)
    with pytest.raises(KeyError):
        replica.info()


def test_a_call_on_a_replica_whose_node_is_gone_fails_instead_of_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.core.errors import ReplicaError
    from autotune.serve import handle as handle_mod

    class Never:
        def result(self, timeout_s: float) -> None:
            raise TimeoutError("no answer")

    class Handle:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return type("M", (), {"remote": staticmethod(lambda *a, **k: Never())})

    monkeypatch.setattr(handle_mod.slots, "node_lost", lambda nodes, wait_s=0.0: "Ray node abc was lost")
    replica = handle_mod.ServeReplica(Handle(), ready_wait_s=600, bench_wait_s=600, nodes=("abc",), check_s=0.01)
    with pytest.raises(ReplicaError, match="Ray node abc was lost"):
        replica.wait_ready("t")


def test_a_deploy_onto_a_slot_whose_node_is_lost_is_retried_not_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    """serve.run waits for a replica that never becomes healthy when its slot's node is gone: the deploy asks Ray
    whether the node lives, deletes the application (which ends the waiting call) and raises NodeLostError, which the
    runner passes to Ray Tune (a rerun), with the slot told to the pool as interrupted and released."""
    import threading

    from ray import serve

    from autotune.core.errors import NodeLostError
    from autotune.core.trial import LaunchSpec
    from autotune.serve import handle as handle_mod
    from autotune.trial.replica import DeployRequest
    from autotune.trial.slots import Slot

    deleted = threading.Event()

    def run(app: Any, name: str, route_prefix: str) -> Any:
        deleted.wait(10)  # Serve's wait for RUNNING ends only when the application is gone
        raise RuntimeError(f"Waiting for application {name} to be RUNNING, but application doesn't exist.")

    calls: list[str] = []

    class Remote:
        def __init__(self, name: str) -> None:
            self.name = name

        def remote(self, *args: Any) -> None:
            calls.append(self.name)

    class Pool:
        release = Remote("release")
        interrupted = Remote("interrupted")

    monkeypatch.setattr(serve, "run", run)
    monkeypatch.setattr(handle_mod, "_tell", lambda ref: None)  # no Ray here: the pool's answer is not awaited
    monkeypatch.setattr(serve, "delete", lambda name, _blocking=True: deleted.set())
    monkeypatch.setattr(handle_mod.slots, "find", lambda owner: Pool())
    monkeypatch.setattr(handle_mod.slots, "describe", lambda pool, slot: Slot(3, ("abc",), 1, 0, 1))
    monkeypatch.setattr(handle_mod.slots, "size", lambda pool: 2)
    monkeypatch.setattr(handle_mod.slots, "node_lost", lambda nodes, wait_s=60.0: "Ray node abc was lost")
    deployer = handle_mod.ServeDeployer(
        ready_wait_s=1, bench_wait_s=1, acquire=lambda pool, number=None: 3, check_s=0.01
    )
    launch = LaunchSpec(engine="sim", argv=("python", "-m", "x"), env={}, host="127.0.0.1", port=0, gpus=1)
    with pytest.raises(NodeLostError, match="Ray node abc was lost while it deployed"):
        deployer.deploy(DeployRequest(name="trial-7", study="s", launch=launch, owner="o", number=7, trial_id="t7"))
    assert deleted.is_set() and calls == ["interrupted", "release"]
