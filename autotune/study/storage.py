"""Where the Optuna study lives: SQLite in the study directory by default, or a shared database (``--storage URL``,
e.g. PostgreSQL for a team or an optuna-dashboard server). The records in ``results/<study>/`` stay the source of truth
either way; the database holds what the sampler learned."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.space import StudySpec
from autotune.trial.records import TrialRecord


def redact_url(url: str) -> str:
    """The URL without its password (``postgresql://user:***@host/db``)."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def open_shared_study(spec: StudySpec, url: str, records: Sequence[TrialRecord], *, default: bool) -> Any:
    """The study in ``url``; errors say which storage failed and how to fix it.

    On a shared database a study of the same name may belong to another results directory: a study there with
    measured trials while this directory holds no record is refused rather than mixed."""
    import optuna

    from autotune.study.optuna_study import open_study

    shown = redact_url(url)
    try:
        study = open_study(spec, url)
    except ImportError as exc:
        raise AutotuneError(f"the storage {shown} needs a database driver that is not installed ({exc}); for "
                            "PostgreSQL: pip install 'autotune[postgres]' (psycopg)") from exc
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy's errors differ by database; all mean the same here
        if isinstance(exc, AutotuneError):
            raise
        raise AutotuneError(f"cannot open the Optuna study '{spec.name}' in {shown}: {type(exc).__name__}: "
                            f"{str(exc).splitlines()[0] if str(exc) else ''}. Check the URL, that the database "
                            "server runs and that the user may create tables.") from exc
    if not default and not records:
        measured = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                    if "duplicate_of" not in t.user_attrs]
        if measured:
            raise AutotuneError(
                f"the study '{spec.name}' in {shown} already has {len(measured)} finished trial(s), but this results "
                "directory has no record of them: another results directory uses that study name. Use --study with a "
                "new name, or run from the results directory that owns it (--results-dir).")
    return study
