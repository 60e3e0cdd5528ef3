"""The output-equality gate: a speculative winner whose greedy outputs differ from the non-speculative server's is
never recommended; the floor measured between non-speculative trials is the tolerance."""

from __future__ import annotations

from dataclasses import replace

from autotune.bench.types import GreedySample
from autotune.export.analysis import analyze
from autotune.export.output_gate import FAILED, NOT_APPLICABLE, PASSED, compare_outputs, output_gate
from autotune.space import Objective
from autotune.trial.records import TrialRecord
from tests.export.conftest import REAL, make_record

NGRAM = {"speculative-algorithm": "NGRAM", "speculative-num-draft-tokens": 8}
OUT = ((5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15))


def with_sample(rec: TrialRecord, outputs: tuple[tuple[int, ...], ...], max_new: int = 4) -> TrialRecord:
    assert rec.bench is not None
    return replace(rec, bench=replace(rec.bench, greedy=GreedySample(max_new_tokens=max_new, outputs=outputs)))


def plain(number: int, tput: float = 1000.0, outputs: tuple[tuple[int, ...], ...] = OUT) -> TrialRecord:
    return with_sample(make_record(number, tputs={1: tput / 10, 32: tput}, engine=REAL), outputs)


def spec(number: int, tput: float, outputs: tuple[tuple[int, ...], ...], env: dict | None = None) -> TrialRecord:
    rec = make_record(number, tputs={1: tput / 5, 32: tput}, flags=NGRAM, accept=1.7, engine=REAL, env=env)
    return with_sample(rec, outputs)


def test_compare_outputs_names_the_first_differing_token() -> None:
    ref = GreedySample(4, OUT)
    cand = GreedySample(4, (OUT[0], (9, 10, 99), OUT[2]))
    same, diffs = compare_outputs(ref, cand)
    assert same == 2
    assert [(d.prompt, d.first_diff_at) for d in diffs] == [(1, 2)]


def test_identical_outputs_pass_and_differing_ones_fail() -> None:
    records = [plain(0), spec(1, 2000.0, OUT), spec(2, 3000.0, ((5, 6, 7, 9), *OUT[1:]))]
    ok, bad = output_gate(records[1], records), output_gate(records[2], records)
    assert (ok.status, ok.reference, ok.identical, ok.prompts) == (PASSED, 0, 3, 3)
    assert bad.status == FAILED and bad.blocks
    assert [(d.prompt, d.first_diff_at) for d in bad.differences] == [(0, 3)]
    assert "FAILED" in bad.summary() and "prompt 0 at token 3" in bad.summary()


def test_the_export_never_recommends_a_config_that_changes_outputs() -> None:
    records = [plain(0), spec(1, 2000.0, OUT), spec(2, 3000.0, ((5, 6, 7, 9), *OUT[1:]))]
    a = analyze(
        study_name="g",
        objectives=[Objective("output_tok_per_s", "max", "maximize")],
        records=records,
        load_levels=[1, 32],
    )
    assert a.best.record is not None and a.best.record.number == 1  # trial 2 is faster but changes outputs
    assert a.best.method == "output_gate" and "set aside trial(s) 2" in a.best.reason
    assert a.gate is not None and a.gate.status == PASSED
    assert [g.candidate for g in a.gated_out] == [2]
    assert a.schedule is not None and 2 in a.schedule.blocked


def test_the_floor_between_non_speculative_trials_is_the_tolerance() -> None:
    noisy = (OUT[0], (9, 10, 12), OUT[2])  # a second non-speculative server differs on one prompt
    records = [plain(0), plain(1, 900.0, noisy), spec(2, 3000.0, (OUT[0], OUT[1], (12, 13, 0, 15)))]
    g = output_gate(records[2], records)
    assert (g.status, g.tolerance, g.floor_trials) == (PASSED, 1, (1,))


def test_not_applicable_without_samples_without_reference_or_with_simulated_acceptance() -> None:
    bare = make_record(3, tputs={1: 10, 32: 100}, flags=NGRAM, engine=REAL)
    assert output_gate(bare, [plain(0), bare]).status == NOT_APPLICABLE
    lonely = spec(1, 2000.0, OUT)
    assert "no complete non-speculative" in output_gate(lonely, [lonely]).reason
    sim = spec(2, 2000.0, ((0,),), env={"SGLANG_SIMULATE_ACC_LEN": "3.0"})
    g = output_gate(sim, [plain(0), sim])
    assert g.status == NOT_APPLICABLE and "simulated" in g.reason
    assert output_gate(plain(0), [plain(0)]).status == NOT_APPLICABLE


def test_when_every_speculative_config_fails_the_plain_one_is_recommended() -> None:
    records = [plain(0, 500.0), spec(1, 3000.0, ((1,), (2,), (3,)))]
    a = analyze(
        study_name="g",
        objectives=[Objective("output_tok_per_s", "max", "maximize")],
        records=records,
        load_levels=[1, 32],
    )
    assert a.best.record is not None and a.best.record.number == 0


def test_a_sample_with_failed_requests_says_so_not_to_set_greedy_prompts() -> None:
    """A study that set bench.greedy_prompts, whose speculative server failed a greedy request: the gate cannot compare
    its outputs and says why, instead of telling the user to set what they set."""
    failed = spec(1, 2000.0, (OUT[0], (), OUT[2]))
    assert failed.bench is not None and failed.bench.greedy is not None
    failed = replace(
        failed,
        bench=replace(failed.bench, greedy=replace(failed.bench.greedy, errors=("prompt 1: HTTP 500, no output_ids",))),
    )
    g = output_gate(failed, [plain(0), failed])
    assert g.status == NOT_APPLICABLE and "greedy_prompts" not in g.reason
    assert "1 of its 3 greedy requests failed (prompt 1: HTTP 500" in g.reason
