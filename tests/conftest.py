from __future__ import annotations

import functools
import os
import random
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, which names an item's group only with --dist loadgroup
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast lane (``-m "not slow"``) leaves out the research harness (marked ``research``) unless the marker
    expression names it. The slow (Ray, end-to-end) tests run first, in their collected order, then the rest: with
    ``-n 2`` the long tests start at once and the many short ones fill in behind them, instead of a long test starting
    last. On an xdist worker, an ``xdist_group`` is named in the item's id whatever ``--dist`` says, so the group's
    tests run on one worker (the scheduler below groups by that name)."""
    markexpr = config.getoption("markexpr", "") or ""
    if "not slow" in markexpr and "research" not in markexpr:
        research = [item for item in items if item.get_closest_marker("research") is not None]
        if research:
            config.hook.pytest_deselected(items=research)
            items[:] = [item for item in items if item.get_closest_marker("research") is None]
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the collected order within each
    if hasattr(config, "workerinput"):
        for item in items:
            names = sorted(
                {
                    str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")
                }
            )
            if names and "@" not in item.nodeid.rpartition("]")[2]:
                item._nodeid = f"{item.nodeid}@{'_'.join(names)}"


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook; without xdist it is never called
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """With ``-n 2`` (any ``--dist``; the README says ``--dist loadgroup``): each worker takes the next test in the
    order above when it is free (not reordered by group size); the tests of an ``xdist_group`` (a module-scoped study)
    stay on one worker, so that study runs once."""
    from xdist.scheduler import LoadGroupScheduling

    config.option.loadscopereorder = False
    return LoadGroupScheduling(config, log)


# Ports a test picks ahead for a server: above Ray's worker ports (10002-19999) and below the kernel's ephemeral range,
# where the processes Ray starts meanwhile take their ports with bind(0). A port picked with bind(0) instead could be
# handed again to one of them before the server binds it (a study then stops with "port ... is in use").
_PICK_LOW = 20000


@functools.cache
def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, outside the ports Ray's processes take for themselves."""
    high = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(_PICK_LOW, high) if high > _PICK_LOW + 100 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError(f"no free port on 127.0.0.1 between {_PICK_LOW} and {high}")


@pytest.fixture
def port() -> int:
    return free_port()


# The variables a site sets to keep NVLink multicast off (autotune.core.site), as on the lent GPU machines.
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


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server (from the pgserver package) for the session: its database ``autotune``. The tests that
    use it share an ``xdist_group``, so with ``-n 2`` one worker starts it once."""
    pgserver = pytest.importorskip(
        "pgserver", reason="the PostgreSQL test server is a dev dependency: pip install -e '.[dev]' (pgserver, psycopg)"
    )
    pytest.importorskip("psycopg", reason="pip install 'autotune[postgres]'")
    # As root, pgserver runs PostgreSQL as an unprivileged user, who must reach the data directory: not under
    # pytest's 0700 temporary root, so a directory of its own directly in the system temp dir.
    data = tempfile.mkdtemp(prefix="autotune-pg-")
    try:
        server = pgserver.get_server(data, cleanup_mode="stop")
        server.psql("CREATE DATABASE autotune;")
        yield server.get_uri("autotune")  # a Unix socket in the data directory; no TCP port
        server.cleanup()
    finally:
        shutil.rmtree(data, ignore_errors=True)
