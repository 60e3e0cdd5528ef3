"""The project's exception tree.

    AutotuneError
    ├── SpaceError            a search-space / study YAML is invalid (names file, key and fix)
    ├── EngineError           carries the FailureKind a trial it stops is recorded with
    │   ├── UnknownFlagError        a flag the installed engine release does not know
    │   ├── EngineUnavailableError  the engine is not installed, or its --help fails
    │   └── HelpTimeoutError        the engine's --help did not finish in time
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

    kind = FailureKind.UNKNOWN


class UnknownFlagError(EngineError):
    """A server flag that the installed engine release does not accept."""

    kind = FailureKind.UNKNOWN_FLAG


class EngineUnavailableError(EngineError):
    """The engine cannot be started on this worker (not installed, or its ``--help`` exits with an error)."""

    kind = FailureKind.ENGINE_UNAVAILABLE


class HelpTimeoutError(EngineError):
    """The engine's ``--help`` (read to check the flags) did not finish in time."""

    kind = FailureKind.HELP_TIMEOUT


class LaunchError(AutotuneError):
    """The server process exited, or did not become ready in time."""

    def __init__(self, kind: FailureKind, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.log_tail = log_tail


class BenchError(AutotuneError):
    """The benchmark could not be completed against a ready server."""
