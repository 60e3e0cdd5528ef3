"""``python -m autotune.report results/<study> --rebuild-db``: rebuild the study's Optuna database (``study.db``) from
its records, the study's source of truth, after the database was lost or damaged (truncated, a disk error).

The old file is moved aside (``study.db.broken-<time>``), never deleted. Every record becomes a finished Optuna trial
with its parameters, objective values, constraints and tags, under its own trial number (numbers with no record, the
proposals the searcher skipped, become failed trials), so a resume continues the numbering instead of reusing it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.errors import AutotuneError
from autotune.space import StudySpec
from autotune.store import StudyStore


@dataclass(frozen=True)
class Rebuilt:
    db: Path
    moved_aside: Path | None
    trials: int  # Optuna trials written (records plus the numbers without one)
    records: int


def _spec_of(study_dir: Path, space: Path | None) -> StudySpec:
    from autotune.space import load_study
    from autotune.space.types import StudyOverrides

    try:
        saved = json.loads((study_dir / "study.json").read_text())
    except (OSError, ValueError) as exc:
        raise AutotuneError(f"{study_dir / 'study.json'} cannot be read ({exc}); it names the study to rebuild") from exc
    source = space or Path(str(saved.get("source") or ""))
    if not source.is_file():
        raise AutotuneError(f"the study's file {source} is gone; pass it with --space FILE (the same study YAML)")
    return load_study(source, overrides=StudyOverrides(name=str(saved.get("name"))))


def _distribution(spec: StudySpec, name: str) -> Any:
    import optuna.distributions as d

    p = spec.param(name)
    if p.type == "int":
        return d.IntDistribution(int(p.low), int(p.high), step=int(p.step or 1), log=p.log)  # type: ignore[arg-type]
    if p.type == "float":
        return d.FloatDistribution(float(p.low), float(p.high), step=p.step, log=p.log)  # type: ignore[arg-type]
    return d.CategoricalDistribution(list(p.choices))


def rebuild_db(study_dir: Path, space: Path | None = None) -> Rebuilt:
    import optuna

    from autotune.dashboard_attrs import name_objectives
    from autotune.optuna_study import constraint_values, make_sampler, objective_values
    from autotune.score import objective_key

    spec = _spec_of(study_dir, space)
    store = StudyStore(study_dir)
    records = {r.number: r for r in store.load()}
    if not records:
        raise AutotuneError(f"{study_dir} holds no trial record to rebuild study.db from")
    db = study_dir / "study.db"
    aside = None
    if db.exists():
        aside = db.with_name(f"study.db.broken-{time.strftime('%Y%m%d-%H%M%S')}")
        db.rename(aside)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=spec.name, storage=store.db_url, sampler=make_sampler(spec),
                                directions=[o.direction for o in spec.objectives])
    name_objectives(study, [objective_key(o.metric, o.level) for o in spec.objectives])
    for number in range(max(records) + 1):
        rec = records.get(number)
        if rec is None:
            study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL,
                                                      user_attrs={"skipped": "rebuilt: no record of this number"}))
            continue
        params = {k: v for k, v in rec.params.items() if v is not None and any(p.name == k for p in spec.params)}
        attrs = {"outcome": rec.outcome.value, "trial_id": rec.trial_id, "rebuilt": True}
        if rec.failure is not None:
            attrs["failure"] = rec.failure.value
        try:
            trial = optuna.trial.create_trial(
                params=params, distributions={k: _distribution(spec, k) for k in params},
                values=objective_values(spec, rec), user_attrs=attrs,
                system_attrs={"constraints": list(constraint_values(spec, rec).values())})
        except ValueError as exc:  # a value outside the study file's range now (the file was edited)
            raise AutotuneError(f"trial {number}'s parameters do not fit the study file's ranges ({exc}); pass the "
                                "study YAML the study ran with, --space FILE") from exc
        study.add_trial(trial)
    return Rebuilt(db, aside, max(records) + 1, len(records))
