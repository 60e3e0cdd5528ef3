"""The rules a study searches with, in the order the searcher consults them. Removing a rule is removing its line."""

from __future__ import annotations

from autotune.policy import fit
from autotune.policy.base import Rules
from autotune.policy.cells import NewCells
from autotune.policy.defer import Defer
from autotune.policy.learn import Learn
from autotune.policy.prescreen import study_sizes
from autotune.policy.rejected_flags import RejectedFlags
from autotune.policy.repairing import Repair
from autotune.policy.repeats import Repeats
from autotune.space import StudySpec


def default_rules(spec: StudySpec, sizes: fit.Sizes | None | bool = True) -> Rules:
    """The study's rules. ``sizes``: what ``autotune.policy.fit`` predicts with (True: read with ``study_sizes``;
    None or False: no memory prediction)."""
    known = study_sizes(spec) if sizes is True else (sizes or None)
    return Rules(
        [
            Repeats(),  # a measured or running point is answered from its result, not launched again
            NewCells(spec),  # settings a launch tried (memory fraction aside) wait until every one is tried
            Learn(spec),  # what the study's own launches ruled out
            Repair(spec, known),  # the running cap and KV cache the top load needs
            RejectedFlags(spec),  # stop when the engine rejects what every trial passes
            Defer(spec, known),  # seed points launched last
        ]
    )
