"""Give a proposal what the load being optimised needs before it is launched (the cap and the KV cache).

A point whose running batch is capped below the highest load level its objectives or constraints read, or whose KV
cache cannot hold that load's requests, measures the cap or the memory, not its other settings. Setting such points
aside (``autotune.policy.prescreen``) wastes the sampler's proposal; repairing it keeps the proposal's other settings:

- **the running cap** (``EngineModel.running_cap``: SGLang's ``--max-running-requests``, 48 by default in any
  speculative mode) is lifted to the smallest value of the study's cap parameter that reaches the top load;
- **the KV cache**: where ``autotune.policy.fit`` can predict the cache a launch allocates and the workload's lengths are
  known (synthetic), the memory fraction (``EngineModel.memory_fraction_flag``) is raised to the smallest value of its parameter whose cache holds the
  top load's requests at full length (with ``KV_MARGIN``), among the values predicted to fit. Where no value reaches
  it, the largest such value (the smallest one at the flags' token limit, ``--max-total-tokens``, where one reaches
  that); a value is never lowered. The cache a value gives is ``autotune.policy.kvmodel``'s: the prediction corrected by what
  the study's launches allocated.

Only parameters the study searches are changed, and only to values of their own domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.core.errors import SpaceError
from autotune.core.trial import TrialConfig
from autotune.engines import engine_model
from autotune.engines.memory import Sizes
from autotune.policy import fit
from autotune.policy.kvmodel import KvModel
from autotune.policy.prescreen import cap_lifts, launched_config
from autotune.space import StudySpec
from autotune.space.types import ParamSpec
from autotune.space.values import params_key, rounded

KV_MARGIN = 1.2  # cache tokens per token the top load's requests hold at full length
FLOAT_STEPS = 100  # a float memory parameter without a step or rounding is tried at this many values


@dataclass(frozen=True)
class Repaired:
    params: dict[str, Any]
    changes: tuple[str, ...]  # "max_running_requests None -> 128", ...

    @property
    def reason(self) -> str:
        return "repaired: " + ", ".join(self.changes)


def _mem_values(p: ParamSpec) -> list[float]:
    if p.type == "categorical":
        return sorted(float(c) for c in p.choices if isinstance(c, (int, float)) and not isinstance(c, bool))
    if p.type != "float" or p.low is None or p.high is None:
        return []
    lo, hi = float(p.low), float(p.high)
    step = float(p.step) if p.step else None
    n = int(round((hi - lo) / step)) if step else FLOAT_STEPS
    return sorted({rounded(p, lo + (hi - lo) * k / n) for k in range(n + 1)})


class Repairer:
    """``repair(params)``: the point with the cap and KV memory the top load needs, or None when nothing changes."""

    def __init__(
        self,
        spec: StudySpec,
        top: int | None,
        sizes: Sizes | None,
        kv: KvModel | None = None,
    ) -> None:
        self.spec = spec
        self.top = top
        self.sizes = sizes
        self.kv = kv or KvModel(spec, sizes)
        self.model = engine_model(spec.engine)
        self.cap = next((p for p in spec.params if p.flag == self.model.running_cap_flag and not p.when), None)
        self.mem = next((p for p in spec.params if p.flag == self.model.memory_fraction_flag and not p.when), None)
        w = spec.workload
        self.tokens_per_request = w.input_len + w.output_len if w.kind == "synthetic" else None
        self._mem_values = _mem_values(self.mem) if self.mem is not None else []
        self._repairs: dict[str, Repaired | None] = {}  # forgotten when the KV model changes
        self._configs: dict[str, TrialConfig | None] = {}  # a point's flags (None: not a point of the space)
        self._fits: dict[str, bool] = {}  # whether a point is predicted to fit

    def forget(self) -> None:
        """Drop remembered answers (after the KV model changed)."""
        self._repairs.clear()

    def repair(self, params: dict[str, Any]) -> Repaired | None:
        key = params_key(params)
        if key not in self._repairs:
            self._repairs[key] = self._repair(params)
        return self._repairs[key]

    def _repair(self, params: dict[str, Any]) -> Repaired | None:
        if self.top is None:
            return None
        out, changes = dict(params), []
        tc = self._config(out)
        if tc is None:
            return None
        cap = self.model.running_cap(tc.flags)
        if self.cap is not None and cap is not None and cap < self.top:
            lifts = cap_lifts(self.cap, self.top)
            if lifts:
                changes.append(
                    f"{self.cap.name} {out.get(self.cap.name)} -> {lifts[0]} (cap {cap} < top load {self.top})"
                )
                out[self.cap.name] = lifts[0]
        mem = self._memory(out)
        if mem is not None and mem != out.get(self.mem.name if self.mem else ""):
            assert self.mem is not None
            changes.append(f"{self.mem.name} {out.get(self.mem.name)} -> {mem} (KV cache for the top load)")
            out[self.mem.name] = mem
        return Repaired(out, tuple(changes)) if changes else None

    def kv_need(self, flags: Mapping[str, Any]) -> float | None:
        """Cache tokens the top load's requests hold at full length (running ones only: at most the cap)."""
        if self.top is None or self.tokens_per_request is None:
            return None
        cap = self.model.running_cap(flags)
        running = min(self.top, cap) if cap is not None else self.top
        return running * self.tokens_per_request * KV_MARGIN

    def _memory(self, params: dict[str, Any]) -> float | None:
        """The memory fraction the point should launch with, or None to leave it."""
        if self.mem is None or self.sizes is None or self.mem.name not in params:
            return None
        current = params[self.mem.name]
        if current is None:
            return None
        tc = self._config(params)
        if tc is None:
            return None
        need = self.kv_need(tc.flags)
        if need is None:
            return None
        tokens = self.kv.tokens(params)
        if tokens is None or tokens >= need or self.kv.at_cap(params):
            return None
        best: float | None = None
        for value in self._mem_values:
            if value <= float(current):
                continue
            candidate = {**params, self.mem.name: value}
            if not self._fit(candidate):
                continue
            best = value
            tokens = self.kv.tokens(candidate)
            if (tokens is not None and tokens >= need) or self.kv.at_cap(candidate):
                break  # holds the load, or the flags' token limit (--max-total-tokens): more memory adds nothing
        return best

    def _config(self, params: dict[str, Any]) -> TrialConfig | None:
        """The point's flags as its trial launches them (``speculative_caps: tie`` applied), or None."""
        key = params_key(params)
        if key not in self._configs:
            try:
                self._configs[key] = launched_config(self.spec, params)
            except SpaceError:
                self._configs[key] = None
        return self._configs[key]

    def _fit(self, params: dict[str, Any]) -> bool:
        key = params_key(params)
        if key not in self._fits:
            assert self.sizes is not None
            trial = self._config(params) or launched_config(self.spec, params)  # not a point: its SpaceError raised
            self._fits[key] = fit.predict(self.sizes, trial.flags, tp_size=trial.tp_size, model=self.model).fits
        return self._fits[key]
