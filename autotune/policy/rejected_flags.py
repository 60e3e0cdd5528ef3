"""Stop the study when the engine rejected something every trial passes the same way.

An unknown flag name fails every trial that passes the flag: fixed flags and unconditional parameters. A rejected
value fails every trial only when the value is fixed; a sampled value's one bad choice does not."""

from __future__ import annotations

from autotune.core.failures import FailureKind
from autotune.policy.base import Rule
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord


def always_passed_flags(spec: StudySpec) -> set[str]:
    """Flags every trial passes: fixed ``server.flags`` and parameters without a condition."""
    flags = set(spec.server.flags)
    flags.update(p.flag for p in spec.params if p.flag and not p.when)
    return flags


def fixed_flags(spec: StudySpec) -> set[str]:
    """Flags passed with the same value by every trial: the study's fixed ``server.flags``."""
    return set(spec.server.flags)


class RejectedFlags(Rule):
    name = "rejected-flags"

    def __init__(self, spec: StudySpec) -> None:
        self.always = always_passed_flags(spec)
        self.fixed = fixed_flags(spec)

    def stop(self, record: TrialRecord) -> str | None:
        if record.failure is FailureKind.UNKNOWN_FLAG:
            candidates, what = self.always, "which every trial passes"
        elif record.failure is FailureKind.INVALID_VALUE:
            candidates, what = self.fixed, "a value fixed in server.flags that every trial passes"
        else:
            return None
        named = sorted(candidates & set(record.rejected_flags))  # the flags the engine named, as the record holds them
        if not named:
            return None
        return (
            f"stopping the study: the installed engine rejects --{', --'.join(named)}, {what}, so every trial "
            f"would fail the same way. {record.message}"
        )
