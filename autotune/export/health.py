"""Speculative-decoding health checks: broken drafters (accept length ~1.0) and the silent 48-request cap. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from autotune.engines.sglang_facts import SPEC_DEFAULT_MAX_RUNNING_REQUESTS as SPEC_DEFAULT_MAX_RUNNING
from autotune.engines.sglang_model import SGLANG
from autotune.export.accessors import (
    accept_lengths,
    draft_model_path,
    flag_value,
    is_set,
    is_speculative,
    speculative_algorithm,
)
from autotune.trial.records import TrialRecord

BROKEN_ACCEPT_LENGTH = 1.05
BROKEN_DRAFTER = "broken drafter / wrong algorithm for this drafter (accept length ~1.0): no draft token accepted"


@dataclass(frozen=True)
class DrafterIssue:
    """One drafter/algorithm pairing whose accept length stayed at ~1.0."""

    drafter: str  # the draft model path; NGRAM's n-gram store settings; else "(none: <algorithm>)"
    algorithm: str
    trials: tuple[int, ...]
    accept_length: float  # lowest value seen
    caveats: tuple[str, ...]  # reasons the figure may be artificial

    @property
    def message(self) -> str:
        trials = ", ".join(str(n) for n in self.trials)
        text = (
            f"{BROKEN_DRAFTER}. Drafter {self.drafter} with --speculative-algorithm {self.algorithm}: "
            f"accept length {self.accept_length:.2f} (trials {trials})."
        )
        if self.caveats:
            text += " Caveat: " + "; ".join(self.caveats) + "."
        return text


@dataclass(frozen=True)
class CapNote:
    """A speculative trial that ran with SGLang's default cap of 48 running requests."""

    number: int
    levels_above_cap: tuple[int, ...]
    reported_max_running: int | None  # what the server logged, when known

    @property
    def message(self) -> str:
        seen = (
            f" (server reported max_running_requests={self.reported_max_running})" if self.reported_max_running else ""
        )
        text = (
            f"Trial {self.number}: speculative without --max-running-requests, so SGLang capped running requests at "
            f"{SPEC_DEFAULT_MAX_RUNNING}{seen}."
        )
        if self.levels_above_cap:
            levels = ", ".join(str(c) for c in self.levels_above_cap)
            text += f" At concurrency {levels} the requests beyond {SPEC_DEFAULT_MAX_RUNNING} queued."
        return text + " Set --max-running-requests explicitly to lift it."


def drafter_issues(records: Sequence[TrialRecord]) -> tuple[DrafterIssue, ...]:
    """Speculative trials with any accept length (per level or server) <= 1.05, grouped by drafter and algorithm."""
    groups: dict[tuple[str, str], list[tuple[int, float, tuple[str, ...]]]] = {}
    for rec in sorted(records, key=lambda r: r.number):
        algorithm = speculative_algorithm(rec)
        if algorithm is None:
            continue
        low = [a for a in accept_lengths(rec) if a <= BROKEN_ACCEPT_LENGTH]
        if not low:
            continue
        drafter = draft_model_path(rec) or SGLANG.draft_store(rec.flags) or f"(none: {algorithm})"
        groups.setdefault((drafter, algorithm), []).append((rec.number, min(low), _caveats(rec)))
    issues = []
    for (drafter, algorithm), hits in groups.items():
        caveats = tuple(dict.fromkeys(c for _, _, cs in hits for c in cs))
        issues.append(
            DrafterIssue(
                drafter=drafter,
                algorithm=algorithm,
                trials=tuple(n for n, _, _ in hits),
                accept_length=min(a for _, a, _ in hits),
                caveats=caveats,
            )
        )
    return tuple(issues)


def _caveats(rec: TrialRecord) -> tuple[str, ...]:
    out = []
    if str(flag_value(rec, "load-format") or "").lower() == "dummy" and not is_set(
        flag_value(rec, "speculative-draft-load-format")
    ):
        out.append("--load-format dummy gives the drafter random weights, so acceptance is meaningless here")
    forced = rec.env.get("SGLANG_SIMULATE_ACC_LEN") or rec.workload_properties.get("SGLANG_SIMULATE_ACC_LEN")
    if forced is not None:
        out.append(f"SGLANG_SIMULATE_ACC_LEN={forced} forces the accept length")
    return tuple(out)


def cap_notes(records: Sequence[TrialRecord], load_levels: Sequence[int]) -> tuple[CapNote, ...]:
    """Measured speculative trials without an explicit --max-running-requests: the 48-request cap applied."""
    notes = []
    for rec in sorted(records, key=lambda r: r.number):
        if rec.bench is None or not is_speculative(rec) or is_set(flag_value(rec, "max-running-requests")):
            continue
        above = tuple(c for c in sorted(load_levels) if c > SPEC_DEFAULT_MAX_RUNNING)
        notes.append(CapNote(rec.number, above, rec.phases.max_running_requests))
    return tuple(notes)
