"""What a study's own measurements say about points not launched yet: the searcher sets such points aside.

- **A drafter that accepts nothing.** A trial measured with an accept length of at most ``BROKEN_ACCEPT`` at every load
  level (SGLang reports it per request) used a drafter whose draft tokens are all rejected: every other point with that
  drafter pays the drafting cost for nothing (the user story's custom drafter: accept length 1.00).
- **Floats tuned enough in one discrete cell.** Points that share every categorical, boolean and integer value differ
  only in float settings (``mem_fraction_static``); after ``CELL_LAUNCHES`` launches in one such cell, further ones
  are set aside while other cells remain, so the launches explore the discrete structure first. Spaces without float
  parameters are unaffected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from autotune.engines import sglang_rules
from autotune.records import TrialOutcome, TrialRecord
from autotune.space import StudySpec

BROKEN_ACCEPT = 1.05
CELL_LAUNCHES = 2


class Learned:
    def __init__(self, spec: StudySpec) -> None:
        self.spec = spec
        self.floats = {p.name for p in spec.params if p.type == "float"}
        self.drafter_param = next((p.name for p in spec.params if p.flag == sglang_rules.DRAFT_MODEL), None)
        self.broken: dict[str, float] = {}  # drafter path -> the accept length that showed it
        self.cells: Counter[str] = Counter()

    def cell(self, params: Mapping[str, Any]) -> str:
        return repr(sorted((k, repr(v)) for k, v in params.items() if k not in self.floats))

    def observe(self, params: Mapping[str, Any], record: TrialRecord) -> float | None:
        """Learn from a finished trial; returns the highest accept length it measured (None: none reported)."""
        if record.outcome is not TrialOutcome.INVALID:
            self.cells[self.cell(params)] += 1
        if record.bench is None or "SGLANG_SIMULATE_ACC_LEN" in record.env:
            return None
        accepts = [lv.accept_length for lv in record.bench.levels if lv.accept_length is not None]
        if not accepts:
            return None
        self.observe_accept(params, max(accepts))
        return max(accepts)

    def observe_accept(self, params: Mapping[str, Any], accept: float) -> None:
        drafter = params.get(self.drafter_param) if self.drafter_param else None
        if drafter is not None and accept <= BROKEN_ACCEPT:
            self.broken[str(drafter)] = accept

    def resume(self, params: Mapping[str, Any], accept: float | None) -> None:
        """A trial of an earlier driver of the same study (its params and the accept length it recorded)."""
        self.cells[self.cell(params)] += 1
        if accept is not None:
            self.observe_accept(params, accept)

    def reason(self, params: Mapping[str, Any]) -> str | None:
        """Why the study's own results say this point is not worth a launch now (None: no such reason)."""
        drafter = params.get(self.drafter_param) if self.drafter_param else None
        if drafter is not None and str(drafter) in self.broken:
            return (f"drafter {drafter} accepted no draft token when measured (accept length "
                    f"{self.broken[str(drafter)]:.2f})")
        if self.floats and self.cells[self.cell(params)] >= CELL_LAUNCHES:
            return f"its discrete settings were launched {self.cells[self.cell(params)]} times already"
        return None
