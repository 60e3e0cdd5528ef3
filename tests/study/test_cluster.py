"""Starting the study's Ray Serve: a proxy that dies before it is ready is retried, then a clear error."""

from __future__ import annotations

import os

import pytest
import ray.exceptions
from ray import serve

from autotune.core.errors import AutotuneError
from autotune.study import cluster


def _dead_proxy() -> Exception:
    return ray.exceptions.ActorDiedError()


def test_a_proxy_killed_before_it_was_ready_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict] = []

    def start(**kwargs: object) -> None:
        calls.append(dict(kwargs))
        if len(calls) == 1:
            raise _dead_proxy()

    monkeypatch.setattr(serve, "start", start)
    cluster.start_serve(8123)
    assert len(calls) == 2
    assert calls[-1] == {"proxy_location": "HeadOnly", "http_options": {"host": "127.0.0.1", "port": 8123}}


def test_a_proxy_that_never_starts_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def start(**kwargs: object) -> None:
        calls.append(1)
        raise TimeoutError("HTTP proxies not available after 60s.")

    monkeypatch.setattr(serve, "start", start)
    with pytest.raises(AutotuneError) as err:
        cluster.start_serve(8123)
    msg = str(err.value)
    assert len(calls) == cluster.SERVE_START_ATTEMPTS
    assert "127.0.0.1:8123" in msg and "HTTP proxies not available after 60s." in msg
    assert "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S" in msg and "finished trials are kept" in msg


def test_other_errors_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def start(**kwargs: object) -> None:
        raise ValueError("bad http_options")

    monkeypatch.setattr(serve, "start", start)
    with pytest.raises(ValueError, match="bad http_options"):
        cluster.start_serve(8123)


def test_the_proxy_gets_time_to_start_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")  # unreachable: start_ray stops at its reachability check

    with pytest.raises(AutotuneError):
        cluster.start_ray(None, cluster.ClusterRequest(None, None, 8265, None, False), lambda s: None)  # type: ignore[arg-type]
    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == str(cluster.PROXY_READY_S)
    monkeypatch.setenv("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "90")
    with pytest.raises(AutotuneError):
        cluster.start_ray(None, cluster.ClusterRequest(None, None, 8265, None, False), lambda s: None)  # type: ignore[arg-type]
    assert os.environ["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "90"


def test_a_local_cluster_declares_the_cpus_its_slots_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """--num-gpus 6 with one-GPU trials on a small machine: the local cluster declared max(4, cores) CPUs, six trial
    functions (0.5 each) and one slot replica (1) took them all, and the other five slots' replicas were never placed:
    their trials waited at "launching the engine" forever."""
    from pathlib import Path

    from autotune.space import load_study

    spec = load_study(Path(__file__).resolve().parents[2] / "search_spaces" / "smoke.yaml")
    seen: dict[str, object] = {}

    def init(**kwargs: object) -> None:
        seen.update(kwargs)
        raise RuntimeError("stop here")

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(cluster, "port_busy", lambda port: False)
    monkeypatch.setattr(cluster, "loopback_only_ray", lambda: None)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    with pytest.raises(AutotuneError, match="stop here"):
        cluster.start_ray(spec, cluster.ClusterRequest(None, 6, 8265, None, False), lambda s: None)
    assert seen["num_gpus"] == 6 and seen["num_cpus"] >= 6 * cluster.CPUS_PER_SLOT  # type: ignore[operator]
    assert cluster.local_cpus(1, 1) == 4 and cluster.local_cpus(3, 2) == 4  # a small study keeps the old figure


def test_a_joined_cluster_without_cpus_for_its_slots_is_refused_with_the_cap_that_fits() -> None:
    """A joined node with 2 GPUs and 1 CPU: both trials waited at "launching the engine" until their deploys timed out
    (Ray never placed the slots' replicas), then failed as if their configurations had."""
    from autotune.trial.slots import Slot

    two = [Slot(k, ("head",), 1, k, 2) for k in range(2)]
    assert cluster.cpu_shortfall(two, {"head": 3.0}, "head") == ""
    msg = cluster.cpu_shortfall(two, {"head": 1.0}, "head")
    assert "cannot hold 2 trial(s) at once: node head has 1 CPU(s) and 2 trial(s) at once need 3 there" in msg
    assert "--max-concurrent" not in msg and "ray start --num-cpus" in msg, msg
    assert "pass --max-concurrent 1," in cluster.cpu_shortfall(two, {"head": 2.0}, "head")
    # a CPU-only head (the driver's node) and GPU workers of one CPU each: the trial functions stay on the head
    workers = [Slot(0, ("w1",), 1, 0, 1), Slot(1, ("w2",), 1, 0, 1)]
    assert cluster.cpu_shortfall(workers, {"head": 2.0, "w1": 1.0, "w2": 1.0}, "head") == ""
    assert "node w2 has 0 CPU(s)" in cluster.cpu_shortfall(workers, {"head": 2.0, "w1": 1.0, "w2": 0.0}, "head")
    # a CPU-only head of 4 CPUs and two 8-GPU workers at TP 1 (deploy/rayjob-study.yaml): 16 slots whose trial
    # functions (0.5 CPU each) queue on the head, starving no replica; a head without a CPU runs none
    sixteen = [Slot(k, (f"w{k // 8}",), 1, k % 8, 8) for k in range(16)]
    assert cluster.cpu_shortfall(sixteen, {"head": 4.0, "w0": 64.0, "w1": 64.0}, "head") == ""
    assert "node head has 0 CPU(s)" in cluster.cpu_shortfall(sixteen, {"head": 0.0, "w0": 64.0, "w1": 64.0}, "head")
    # no driver node with a CPU: the trial functions go anywhere
    assert "the cluster has 2 CPU(s) and 2 trial(s) at once need 3" in cluster.cpu_shortfall(
        workers, {"w1": 1.0, "w2": 1.0}, None
    )


def test_a_study_on_a_joined_cluster_deletes_only_its_own_serve_applications(monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver ended every study with serve.shutdown(): on a joined cluster that deleted every Serve application
    there (another study's slots, a service in production), even when the study stopped at its start."""
    from types import SimpleNamespace

    from autotune.trial.slots import slot_app_name

    own = "/results/smoke"
    s0, s12 = slot_app_name("smoke", own, 0), slot_app_name("smoke", own, 12)
    apps = ["prod", s0, s12, s0[:-1] + "x", slot_app_name("smoke-2", own, 0), s0 + "-slot-1"]
    calls: list[str] = []
    monkeypatch.setattr(serve, "status", lambda: SimpleNamespace(applications=dict.fromkeys(apps)))
    monkeypatch.setattr(serve, "delete", lambda name, **k: calls.append(name))
    monkeypatch.setattr(serve, "shutdown", lambda: calls.append("shutdown"))
    cluster.stop_serve("smoke", own, own_cluster=False)
    assert calls == [s0, s12]
    calls.clear()
    cluster.stop_serve("smoke", own, own_cluster=True)  # its own local cluster: Serve goes whole
    assert calls == ["shutdown"]


def test_two_drivers_of_one_study_name_on_a_joined_cluster_keep_their_own_slots(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two drivers joined to one cluster that ran study "smoke" from two results folders both deployed onto
    `smoke-slot-<k>`: each replaced the other's trial servers, and the first to end deleted the other's slots. The slot
    names now carry the results folder (a resumed study's slots keep their names); a driver deletes only its own."""
    from types import SimpleNamespace

    from autotune.trial.slots import slot_app_name

    mine, theirs = "/results/a/smoke", "/results/b/smoke"
    assert slot_app_name("smoke", mine, 0) == slot_app_name("smoke", mine, 0) != slot_app_name("smoke", theirs, 0)
    apps = [slot_app_name("smoke", o, k) for o in (mine, theirs) for k in (0, 1)]
    calls: list[str] = []
    monkeypatch.setattr(serve, "status", lambda: SimpleNamespace(applications=dict.fromkeys(apps)))
    monkeypatch.setattr(serve, "delete", lambda name, **k: calls.append(name))
    cluster.stop_serve("smoke", mine, own_cluster=False)
    assert calls == apps[:2]
