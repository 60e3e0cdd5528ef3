"""The project's exception tree.

    AutotuneError
    ├── SpaceError            a search-space / study YAML is invalid (names file, key and fix)
    ├── EngineError
    │   └── UnknownFlagError  a flag the installed engine release does not know
    ├── LaunchError           the server did not become ready (carries a FailureKind and log tail)
    └── BenchError            the benchmark could not run against a ready server

Third-party errors are translated at the boundary: ``raise X(...) from exc``.
"""

from __future__ import annotations

from autotune.records import FailureKind


class AutotuneError(Exception):
    """Base of every error autotune raises on purpose."""


class SpaceError(AutotuneError):
    """A search-space file is invalid. The message names the file, the key and the fix."""


class EngineError(AutotuneError):
    """The engine cannot run this configuration."""


class UnknownFlagError(EngineError):
    """A server flag that the installed engine release does not accept."""


class LaunchError(AutotuneError):
    """The server process exited, or did not become ready in time."""

    def __init__(self, kind: FailureKind, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.log_tail = log_tail


class BenchError(AutotuneError):
    """The benchmark could not be completed against a ready server."""
