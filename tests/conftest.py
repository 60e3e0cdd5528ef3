from __future__ import annotations

import os
import socket

import pytest

os.environ.setdefault("RAY_memory_monitor_refresh_ms", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def port() -> int:
    return free_port()
