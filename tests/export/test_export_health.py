"""Drafter health (accept length ~1.0) and the 48-request cap."""

from __future__ import annotations

from autotune.export.health import BROKEN_DRAFTER, cap_notes, drafter_issues
from tests.export.conftest import make_record


def test_broken_drafter_is_flagged_with_its_path(records, drafters):
    issues = drafter_issues(records)
    assert [(i.drafter, i.trials) for i in issues] == [(drafters["custom"], (2,))]
    msg = issues[0].message
    assert BROKEN_DRAFTER in msg
    assert "broken drafter / wrong algorithm for this drafter (accept length ~1.0): no draft token accepted" in msg
    assert drafters["custom"] in msg and "EAGLE3" in msg and "1.00" in msg


def test_server_accept_length_alone_triggers_the_flag(record_factory):
    rec = record_factory(0, tputs={1: 40}, flags={"speculative-algorithm": "EAGLE"}, server_accept=1.03)
    issues = drafter_issues([rec])
    assert len(issues) == 1 and issues[0].drafter == "(none: EAGLE)"


def test_healthy_or_non_speculative_trials_are_not_flagged(record_factory):
    healthy = record_factory(0, tputs={1: 90}, flags={"speculative-algorithm": "EAGLE3"}, accept=1.06)
    plain = record_factory(1, tputs={1: 60}, accept=1.0)  # no speculation: accept length means nothing
    assert drafter_issues([healthy, plain]) == ()


def test_dummy_weights_add_a_caveat(record_factory):
    rec = record_factory(
        0, tputs={1: 40}, flags={"speculative-algorithm": "EAGLE3", "load-format": "dummy"}, accept=1.0
    )
    (issue,) = drafter_issues([rec])
    assert "dummy" in issue.message and "meaningless" in issue.message


def test_cap_note_when_speculative_without_max_running_requests(records, levels):
    notes = cap_notes(records, levels)
    assert [n.number for n in notes] == [1, 2]  # 4 set --max-running-requests; 6 never launched
    assert notes[0].levels_above_cap == (128,)
    assert "capped running requests at 48" in notes[0].message and "128" in notes[0].message


def test_ngram_stores_are_told_apart_by_their_settings():
    """NGRAM drafts from its n-gram store: a poor store is named by its settings, as the search's set-aside names it
    (``autotune.policy.learned``), and two poor stores are two issues. Both used to be one "(none: NGRAM)"."""
    small = {"speculative-algorithm": "NGRAM", "speculative-ngram-capacity": 64}
    tiny = {"speculative-algorithm": "NGRAM", "speculative-ngram-capacity": 32}
    recs = [
        make_record(1, tputs={1: 50, 8: 300}, flags=small, accept=1.02),
        make_record(2, tputs={1: 50, 8: 300}, flags=tiny, accept=1.01),
        make_record(3, tputs={1: 90, 8: 600}, flags={"speculative-algorithm": "NGRAM"}, accept=3.0),
    ]
    issues = drafter_issues(recs)
    assert sorted((i.drafter, i.trials) for i in issues) == [
        ("NGRAM --speculative-ngram-capacity 32", (2,)),
        ("NGRAM --speculative-ngram-capacity 64", (1,)),
    ]
    assert "Drafter NGRAM --speculative-ngram-capacity 64 with --speculative-algorithm NGRAM" in issues[0].message
