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
