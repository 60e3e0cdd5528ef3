"""Study definitions: the YAML search space, typed (``load_study``), sampled (``suggest``) and resolved
into trial configurations (``to_trial_config``). The format is documented in ``docs/search_space.md``.
"""

from __future__ import annotations

from autotune.space.load import load_study
from autotune.space.sample import suggest, to_trial_config
from autotune.space.schema import FinalistsSpec, ServerSpec, SimSpec, StopRule
from autotune.space.types import (
    METRIC_NAMES,
    Condition,
    Constraint,
    Objective,
    ParamSpec,
    StudyOverrides,
    StudySpec,
    objective_key,
)
from autotune.space.values import condition_holds, is_active

__all__ = [
    "METRIC_NAMES",
    "Condition",
    "Constraint",
    "FinalistsSpec",
    "Objective",
    "ParamSpec",
    "ServerSpec",
    "SimSpec",
    "StopRule",
    "StudyOverrides",
    "StudySpec",
    "condition_holds",
    "is_active",
    "load_study",
    "objective_key",
    "suggest",
    "to_trial_config",
]
