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


def storage_id(trial: optuna.Trial) -> int:
    """The trial's id in its storage (what the storage's methods take), found through the storage's public methods."""
    study_id = trial.storage.get_study_id_from_name(trial.study.study_name)
    return trial.storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)


def mark_feasibility(trial: optuna.Trial, constraints: Mapping[str, float]) -> None:
    """Write the dashboard's constraint list and the feasibility user attributes of a trial not told yet."""
    values = [float(v) for v in constraints.values()]
    trial.storage.set_trial_system_attr(storage_id(trial), LEGACY_CONSTRAINTS_KEY, values)
    trial.set_user_attr("feasible", all(v <= 0 for v in values))
    trial.set_user_attr("constraint_names", list(constraints))


def named_constraints(constraints: Mapping[str, float]) -> dict[str, float]:
    """A trial's constraints by name, without the positional copies (``"0"``, ``"1"``...) read from the list."""
    return {k: v for k, v in constraints.items() if not k.isdigit()}


def mark_export(
    study: optuna.Study, best_number: int | None, verdict: str, decided_by: str, best: optuna.Trial | None = None
) -> None:
    """Say in the dashboard what the export decided, where optuna-dashboard shows it.

    optuna-dashboard's "Best Trial" is the storage's best value among COMPLETE trials: one launch each, constraints
    ignored, ties broken by storage order. autotune's recommendation can differ (feasibility, the finalist stage's
    relaunch means, ties). So the study note (optuna-dashboard's Markdown note) and the study's user attributes
    ``autotune_best_trial`` / ``autotune_verdict`` name the exported config, and the exported trial gets a note of its
    own when ``best`` (a handle on it) is given; FAIL trials with the user attribute ``skipped`` are proposals that were never launched (a repeat of a measured
    point, or set aside before launch), not failures."""
    skipped = sum(
        1 for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,)) if "skipped" in t.user_attrs
    )
    study.set_user_attr("autotune_best_trial", best_number)
    study.set_user_attr("autotune_verdict", verdict)
    lines = [
        f"## autotune's recommendation: trial {best_number}"
        if best_number is not None
        else "## autotune found no feasible config",
        "",
        verdict,
        "",
        f"Decided by: {decided_by}. The dashboard's *Best Trial* is the highest single launch among COMPLETE trials "
        "(constraints and the finalist stage's relaunches ignored); where it names another trial, autotune's "
        "recommendation above is the one exported (results/<study>/best/).",
        "",
        f"{skipped} FAIL trial(s) carry the user attribute `skipped`: proposals answered without a launch (a repeat "
        "of a measured point, or one set aside before launch). They are not failures of a config.",
    ]
    try:
        from optuna_dashboard import save_note
    except ImportError:
        return
    save_note(study, "\n".join(lines))
    if best is not None:
        save_note(best, f"**autotune's exported config** (decided by: {decided_by}).\n\n{verdict}")
