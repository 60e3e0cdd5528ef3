"""The project's exception tree, and the one table that maps an exception to a ``FailureKind``.

    AutotuneError
    ├── SpaceError              a search-space / study YAML is invalid (names file, key and fix)
    ├── EngineError             the engine cannot run this configuration
    │   ├── FlagRejectedError   the installed release refuses flags of the command (``flags`` names them)
    │   │   ├── UnknownFlagError   a flag it does not know
    │   │   └── InvalidValueError  a flag it knows, with a value it rejects (argparse "invalid choice" / bad type)
    │   ├── EngineUnavailableError  the engine is not installed, or its ``--help`` fails
    │   └── HelpTimeoutError    the engine's ``--help`` did not finish
    ├── LaunchError             the server did not become ready (carries a FailureKind and log tail)
    ├── BenchError              the benchmark could not run against a ready server
    ├── ReplicaError            the Serve replica could not be deployed or stopped answering (Ray's errors, translated)
    └── NodeLostError           the Ray node a trial ran on was lost: an infrastructure event, the trial is retried

Third-party errors are translated at the boundary (``raise X(...) from exc``), as httpx's ``map_httpcore_exceptions``
does; ``failure_kind`` then reads the kind from the type, never from the message.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.core.failures import FailureKind


class AutotuneError(Exception):
    """Base of every error autotune raises on purpose."""


class SpaceError(AutotuneError):
    """A search-space file is invalid. The message names the file, the key and the fix."""


class EngineError(AutotuneError):
    """The engine cannot run this configuration."""

    @property
    def kind(self) -> FailureKind:
        """The failure kind a trial stopped by this error is recorded with (from ``FAILURE_KINDS``)."""
        return failure_kind(self)


class FlagRejectedError(EngineError):
    """The installed engine release refuses flags of the launch command; ``flags`` names them (without dashes)."""

    def __init__(self, message: str, flags: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.flags = tuple(flags)


class UnknownFlagError(FlagRejectedError):
    """Server flags that the installed engine release does not know."""


class InvalidValueError(FlagRejectedError):
    """Server flags the installed release knows, given values it rejects."""


class EngineUnavailableError(EngineError):
    """The engine cannot be started on this worker (not installed, or its ``--help`` exits with an error)."""


class HelpTimeoutError(EngineError):
    """The engine's ``--help`` (read to check the flags) did not finish in time."""


class LaunchError(AutotuneError):
    """The server process exited, or did not become ready in time."""

    def __init__(self, kind: FailureKind, message: str, log_tail: str = "", flags: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.log_tail = log_tail
        self.flags = tuple(flags)  # flags the server's argparse rejected (UNKNOWN_FLAG / INVALID_VALUE), from its log


class BenchError(AutotuneError):
    """The benchmark could not be completed against a ready server."""


class ReplicaError(AutotuneError):
    """Ray Serve could not deploy the trial's replica, or the replica stopped answering (died, timed out)."""


class NodeLostError(AutotuneError):
    """The Ray node that held the trial's GPU slot was lost mid-trial. Not a result of the trial's configuration:
    the trial function raises it so Ray Tune reruns the trial on another slot (``FailureConfig.max_failures``), and
    nothing is recorded or told to the sampler for the interrupted attempt."""


# Exception type -> kind, most specific first (the first ``isinstance`` match wins). ``LaunchError`` carries its own.
FAILURE_KINDS: tuple[tuple[type[BaseException], FailureKind], ...] = (
    (InvalidValueError, FailureKind.INVALID_VALUE),
    (UnknownFlagError, FailureKind.UNKNOWN_FLAG),
    (EngineUnavailableError, FailureKind.ENGINE_UNAVAILABLE),
    (HelpTimeoutError, FailureKind.HELP_TIMEOUT),
    (SpaceError, FailureKind.INVALID_CONFIG),
    (BenchError, FailureKind.BENCH_ERROR),
    (ReplicaError, FailureKind.DEPLOY_ERROR),
)


def failure_kind(exc: BaseException) -> FailureKind:
    """The failure kind of an exception raised at a trial's boundary, by its type."""
    if isinstance(exc, LaunchError):
        return exc.kind
    for exc_type, kind in FAILURE_KINDS:
        if isinstance(exc, exc_type):
            return kind
    return FailureKind.UNKNOWN


def rejected_flags(exc: BaseException) -> tuple[str, ...]:
    """The flags an engine refused, when the exception says which (``FlagRejectedError``, ``LaunchError``)."""
    return exc.flags if isinstance(exc, (FlagRejectedError, LaunchError)) else ()
