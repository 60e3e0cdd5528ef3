"""What optuna-dashboard reads, written where it reads it.

- Objective names: the study's ``set_metric_names`` (``output_tok_per_s@max``, not ``objective0``).
- Feasibility: Optuna 5 stores each constraint under ``constraints:<name>``; optuna-dashboard (0.21) reads only the older
  list under the trial's system attribute ``constraints``. Both are written, same values and order, so the dashboard
  marks infeasible trials and Optuna's samplers see the same feasibility as before.
- User attributes: ``feasible`` (a yes/no the dashboard can sort and filter on) and ``constraint_names`` (what each
  value of the list is).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import optuna

LEGACY_CONSTRAINTS_KEY = "constraints"


def name_objectives(study: optuna.Study, names: Sequence[str]) -> None:
    if list(study.metric_names or []) != list(names):
        with warnings.catch_warnings():  # "experimental" in some Optuna releases
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(list(names))


def mark_feasibility(study: optuna.Study, trial: optuna.Trial, constraints: Mapping[str, float]) -> None:
    """Write the dashboard's constraint list and the feasibility user attributes of a trial not told yet."""
    values = [float(v) for v in constraints.values()]
    study._storage.set_trial_system_attr(trial._trial_id, LEGACY_CONSTRAINTS_KEY, values)
    trial.set_user_attr("feasible", all(v <= 0 for v in values))
    trial.set_user_attr("constraint_names", list(constraints))


def named_constraints(constraints: Mapping[str, float]) -> dict[str, float]:
    """A trial's constraints by name, without the positional copies (``"0"``, ``"1"``...) read from the list."""
    return {k: v for k, v in constraints.items() if not k.isdigit()}
