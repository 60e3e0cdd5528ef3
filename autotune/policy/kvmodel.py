"""The KV cache a launch will allocate: ``autotune.policy.fit``'s prediction, corrected by what the study's launches allocated.

SGLang logs the cache it allocated (``KV Cache is allocated. #tokens: N``, kept as ``phases.kv_cache_tokens`` in the
trial record). Where the prediction's inputs are off (the memory the runtime really leaves, buffers it allocates
besides the weights), every launch says by how much. The error in bytes is modelled as a line in the memory fraction,
``error = slope * fraction + offset``: one measured fraction gives the offset (slope 0), two or more distinct fractions
a least-squares line. Tokens are bytes over the bytes a token takes in the cache (target + drafter layers), so points
with and without a drafter correct each other. A cache at the flags' own limit (``EngineModel.kv_token_cap``: SGLang's
``--max-total-tokens``) holds no more however much memory is left, and says nothing of the memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.errors import SpaceError
from autotune.engines import engine_model
from autotune.engines.memory import Sizes
from autotune.policy import fit
from autotune.space import StudySpec, to_trial_config
from autotune.space.values import params_key


class KvModel:
    def __init__(self, spec: StudySpec, sizes: Sizes | None) -> None:
        self.spec = spec
        self.sizes = sizes
        self.model = engine_model(spec.engine)
        self.errors: list[tuple[float, float]] = []  # (memory fraction, allocated - predicted bytes)
        self.version = 0  # bumped on every observation that changes the correction
        self._shapes: dict[str, tuple[float, float, float, int | None] | None] = {}  # a point's shape does not change
        self._line: tuple[int, float, float, float] | None = None  # (version, slope, mean fraction, mean error)

    def _shape(self, params: Mapping[str, Any]) -> tuple[float, float, float, int | None] | None:
        """(memory fraction, predicted cache bytes, bytes per token, the flags' token limit) of a point, or None when
        it cannot be predicted."""
        key = params_key(params)
        if key not in self._shapes:
            self._shapes[key] = self._predicted_shape(params)
        return self._shapes[key]

    def _predicted_shape(self, params: Mapping[str, Any]) -> tuple[float, float, float, int | None] | None:
        if self.sizes is None:
            return None
        try:
            tc = to_trial_config(self.spec, dict(params))
        except SpaceError:
            return None
        frac = tc.flags.get(self.model.memory_fraction_flag)
        if not isinstance(frac, (int, float)) or isinstance(frac, bool):
            frac = self.sizes.default_mem_fraction
        if frac is None:
            return None
        pred = fit.predict(self.sizes, tc.flags, tp_size=tc.tp_size, model=self.model)
        if pred.kv_tokens is None:
            return None
        per_token = self.model.kv_bytes_per_token(self.sizes, tc.flags, tp_size=tc.tp_size)
        if per_token <= 0:
            return None
        return float(frac), pred.kv_tokens * per_token, per_token, self.model.kv_token_cap(tc.flags)

    def observe(self, params: Mapping[str, Any], allocated_tokens: int | None) -> None:
        """A launch of ``params`` allocated ``allocated_tokens`` (None: the log did not say)."""
        if allocated_tokens is None:
            return
        shape = self._shape(params)
        if shape is None:
            return
        frac, predicted, per_token, cap = shape
        if cap is not None and allocated_tokens >= cap:
            return  # the flags' limit set the cache, not the memory
        self.errors.append((frac, allocated_tokens * per_token - predicted))
        self.version += 1

    def correction(self, frac: float) -> float:
        """Bytes to add to the prediction at this memory fraction."""
        if not self.errors:
            return 0.0
        if self._line is None or self._line[0] != self.version:
            xs = [f for f, _ in self.errors]
            ys = [e for _, e in self.errors]
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            var = sum((x - mx) ** 2 for x in xs)
            slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var >= 1e-9 else 0.0
            self._line = (self.version, slope, mx, my)
        _, slope, mx, my = self._line
        return my + slope * (frac - mx)

    def tokens(self, params: Mapping[str, Any]) -> int | None:
        """The cache tokens a launch of ``params`` will allocate, as far as the study knows (None: unknown)."""
        shape = self._shape(params)
        if shape is None:
            return None
        frac, predicted, per_token, cap = shape
        tokens = max(int((predicted + self.correction(frac)) / per_token), 0)
        return min(tokens, cap) if cap is not None else tokens

    def at_cap(self, params: Mapping[str, Any]) -> bool:
        """Whether a launch of ``params`` allocates the flags' own limit (more memory would not add a token)."""
        shape = self._shape(params)
        tokens = self.tokens(params)
        return shape is not None and shape[3] is not None and tokens is not None and tokens >= shape[3]
