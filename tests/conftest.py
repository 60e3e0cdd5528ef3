from __future__ import annotations

import os
import socket

import pytest

os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files with a slow (Ray, end-to-end) test run first, in their collected order, then the rest: with ``-n 2`` the
    long files start at once and the many short ones fill in behind them, instead of a long file starting last."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the collected order within each part


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook; without xdist it is never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With ``-n N`` (pytest-xdist, as the README's test command runs): whole files to a worker, so a module-scoped
    study is run once, each worker taking the next file in the order above when it is free (not reordered by size)."""
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False
    return LoadFileScheduling(config, log)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def port() -> int:
    return free_port()


# The variables a site sets to keep NVLink multicast off (autotune.site), as on the lent GPU machines.
SITE_MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


@pytest.fixture
def site_multicast_off(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """This process (and what it starts) runs on a site that switches NVLink multicast off."""
    for name, value in SITE_MULTICAST_OFF.items():
        monkeypatch.setenv(name, value)
    return dict(SITE_MULTICAST_OFF)


@pytest.fixture
def no_site(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process runs on a site that sets none of the multicast variables."""
    for name in SITE_MULTICAST_OFF:
        monkeypatch.delenv(name, raising=False)
