"""The output-equality gate: a speculative configuration is recommended only when its greedy outputs are those of the
server without speculation. Pure: it reads the greedy samples every trial recorded (``bench.greedy_prompts``).

What is compared: the output token ids of the workload's first N prompts, sent one at a time at temperature 0
(``autotune.bench.greedy``), of the candidate and of the reference (the first complete non-speculative trial with a
sample of the same prompts and length), token for token. Greedy speculative decoding is meant to be lossless, but a
server's numerics are not bit-stable across kernels and batch shapes (SGLang documents deterministic inference as a
separate mode), so two non-speculative servers may differ too. The gate measures that floor when the study has two or
more non-speculative trials with samples: the most prompts on which one of them differs from the reference. A
candidate passes when its differing prompts are no more than that floor (0 with a single non-speculative trial:
then any difference fails). The verdict names the prompts compared, how many were identical, and where each differing
one first differed.

Not applicable (the gate neither passes nor blocks, and says why): a non-speculative candidate; a simulated accept
length (``SGLANG_SIMULATE_ACC_LEN`` on dummy weights: verification pretends to accept, so outputs are meaningless);
no sample recorded (the study did not set ``bench.greedy_prompts``), a sample with failed requests, or no
non-speculative trial to compare with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from autotune.bench.types import GreedySample
from autotune.engines.sglang_facts import simulated_accept_length
from autotune.export.accessors import is_speculative
from autotune.trial.records import TrialOutcome, TrialRecord

PASSED, FAILED, NOT_APPLICABLE = "passed", "failed", "not applicable"


@dataclass(frozen=True)
class Difference:
    prompt: int  # index in the sample
    first_diff_at: int  # first output position that differs
    reference_tokens: int
    candidate_tokens: int


@dataclass(frozen=True)
class GateResult:
    status: str  # PASSED, FAILED or NOT_APPLICABLE
    candidate: int | None  # trial numbers
    reference: int | None
    prompts: int = 0
    identical: int = 0
    differences: tuple[Difference, ...] = ()
    tolerance: int = 0  # differing prompts allowed: the non-speculative servers' own floor
    floor_trials: tuple[int, ...] = ()  # the non-speculative trials that measured the floor
    max_new_tokens: int = 0
    reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def blocks(self) -> bool:
        return self.status == FAILED

    def summary(self) -> str:
        if self.status == NOT_APPLICABLE:
            return f"output-equality gate not applicable: {self.reason}"
        where = ", ".join(f"prompt {d.prompt} at token {d.first_diff_at}" for d in self.differences[:5])
        more = f" (+{len(self.differences) - 5} more)" if len(self.differences) > 5 else ""
        trials = ", ".join(map(str, self.floor_trials))
        floor = (
            f"; allowed {self.tolerance}, the most on which a non-speculative trial ({trials}) differed from "
            "the reference"
            if self.floor_trials
            else "; allowed 0 (one non-speculative trial: no measured floor)"
        )
        text = (
            f"output-equality gate {self.status.upper()}: trial {self.candidate} vs non-speculative trial "
            f"{self.reference}, greedy outputs of {self.prompts} prompts (up to {self.max_new_tokens} tokens): "
            f"{self.identical} identical, {len(self.differences)} differ{floor}"
        )
        return text + (f"; first differences: {where}{more}" if where else "")

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "candidate": self.candidate,
            "reference": self.reference,
            "prompts": self.prompts,
            "identical": self.identical,
            "tolerance": self.tolerance,
            "floor_trials": list(self.floor_trials),
            "max_new_tokens": self.max_new_tokens,
            "differences": [d.__dict__ for d in self.differences],
            "reason": self.reason,
            "summary": self.summary(),
        }


def compare_outputs(reference: GreedySample, candidate: GreedySample) -> tuple[int, tuple[Difference, ...]]:
    """Identical prompts and the differing ones (the first position each differs at), over the shared prompts."""
    same, diffs = 0, []
    for k, (a, b) in enumerate(zip(reference.outputs, candidate.outputs, strict=False)):
        if a == b:
            same += 1
            continue
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        diffs.append(Difference(k, first, len(a), len(b)))
    return same, tuple(diffs)


def _sample(rec: TrialRecord) -> GreedySample | None:
    g = rec.bench.greedy if rec.bench is not None else None
    return g if g is not None and g.outputs and not g.errors else None


def _comparable(a: GreedySample, b: GreedySample) -> bool:
    return a.max_new_tokens == b.max_new_tokens and len(a.outputs) == len(b.outputs)


def output_gate(candidate: TrialRecord, records: Sequence[TrialRecord]) -> GateResult:
    """Judge ``candidate`` against the study's non-speculative trials (module docstring)."""
    n = candidate.number
    if not is_speculative(candidate):
        return GateResult(NOT_APPLICABLE, n, None, reason="the configuration does not speculate")
    try:
        simulated = simulated_accept_length(candidate.env) is not None
    except ValueError:
        simulated = True
    if simulated:
        return GateResult(
            NOT_APPLICABLE,
            n,
            None,
            reason="the accept length is simulated (SGLANG_SIMULATE_ACC_LEN): "
            "its outputs say nothing about the real model's",
        )
    cand = _sample(candidate)
    if cand is None:
        g = candidate.bench.greedy if candidate.bench is not None else None
        reason = (
            f"{len(g.errors)} of its {len(g.outputs)} greedy requests failed ({g.errors[0]}): its outputs cannot be "
            "compared"
            if g is not None and g.errors
            else "the trial recorded no complete greedy sample (set bench.greedy_prompts in the study)"
        )
        return GateResult(NOT_APPLICABLE, n, None, reason=reason)
    sampled = [
        (r, _sample(r))
        for r in sorted(records, key=lambda r: r.number)
        if r.outcome is TrialOutcome.COMPLETE and not is_speculative(r)
    ]
    plain = [(r, s) for r, s in sampled if s is not None and _comparable(s, cand)]
    if not plain:
        return GateResult(
            NOT_APPLICABLE,
            n,
            None,
            reason="no complete non-speculative trial recorded a greedy sample "
            "of the same prompts to compare with (keep speculation off among the choices)",
        )
    ref, ref_sample = plain[0]
    floor = max((len(compare_outputs(ref_sample, s)[1]) for _, s in plain[1:]), default=0)
    same, diffs = compare_outputs(ref_sample, cand)
    status = PASSED if len(diffs) <= floor else FAILED
    return GateResult(
        status,
        n,
        ref.number,
        prompts=len(cand.outputs),
        identical=same,
        differences=diffs,
        tolerance=floor,
        floor_trials=tuple(r.number for r, _ in plain[1:]),
        max_new_tokens=cand.max_new_tokens,
    )
