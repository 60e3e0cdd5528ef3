"""Set aside a proposal the pre-launch screen expects to waste a launch (``autotune.policy.prescreen``): its running
cap is below the load being optimised, or it is predicted not to fit in GPU memory (``autotune.policy.fit``)."""

from __future__ import annotations

from collections.abc import Collection

from autotune.policy import fit
from autotune.policy.base import Params, Rule
from autotune.policy.prescreen import default_screen
from autotune.space import StudySpec


class Screen(Rule):
    name = "screen"

    def __init__(self, spec: StudySpec, sizes: fit.Sizes | None) -> None:
        self.screen = default_screen(spec, sizes)

    def set_aside(self, params: Params, running: Collection[str]) -> str | None:
        return self.screen(params)
