"""The exception -> FailureKind table: kinds come from types, never from messages."""

from __future__ import annotations

import pytest

from autotune.core import errors
from autotune.core.failures import FailureKind


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (errors.UnknownFlagError("x", flags=["a"]), FailureKind.UNKNOWN_FLAG),
        (errors.InvalidValueError("x", flags=["a"]), FailureKind.INVALID_VALUE),
        (errors.EngineUnavailableError("x"), FailureKind.ENGINE_UNAVAILABLE),
        (errors.HelpTimeoutError("x"), FailureKind.HELP_TIMEOUT),
        (errors.SpaceError("x"), FailureKind.INVALID_CONFIG),
        (errors.BenchError("x"), FailureKind.BENCH_ERROR),
        (errors.ReplicaError("x"), FailureKind.DEPLOY_ERROR),
        (errors.LaunchError(FailureKind.NCCL_ERROR, "x"), FailureKind.NCCL_ERROR),
        (
            errors.AutotuneError("invalid choice: unrecognized arguments"),
            FailureKind.UNKNOWN,
        ),  # the message is not read
        (ValueError("x"), FailureKind.UNKNOWN),
    ],
)
def test_failure_kind_by_type(exc: BaseException, kind: FailureKind) -> None:
    assert errors.failure_kind(exc) is kind


def test_every_subclass_in_the_table_precedes_its_base() -> None:
    types = [t for t, _ in errors.FAILURE_KINDS]
    for i, t in enumerate(types):
        assert not any(issubclass(t, earlier) for earlier in types[:i]), f"{t.__name__} is shadowed by an earlier base"


def test_rejected_flags_only_from_flag_rejections() -> None:
    assert errors.rejected_flags(errors.InvalidValueError("x", flags=["page-size"])) == ("page-size",)
    assert errors.rejected_flags(errors.EngineUnavailableError("x")) == ()


def test_records_reexports_the_leaf_values() -> None:
    from autotune.core import failures
    from autotune.trial import records

    assert records.FailureKind is failures.FailureKind and records.PhaseTimings is failures.PhaseTimings
