"""Launch some seed points last (``autotune.policy.prescreen.deferred_seeds``): a capped seed whose lifted twin runs,
and one predicted not to fit in GPU memory, so the search does not wait behind them. The searcher launches them when
only as many launches of the budget remain, or when the stopping rule ends the search."""

from __future__ import annotations

from autotune.policy import fit
from autotune.policy.base import Params, Rule
from autotune.policy.prescreen import deferred_seeds
from autotune.space import StudySpec


class Defer(Rule):
    name = "defer"

    def __init__(self, spec: StudySpec, sizes: fit.Sizes | None) -> None:
        self.spec, self.sizes = spec, sizes

    def deferred(self) -> list[Params]:
        return deferred_seeds(self.spec, self.sizes)
