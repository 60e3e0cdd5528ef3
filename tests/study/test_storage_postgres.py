"""--storage postgresql://...: a study on a real PostgreSQL server (started by the test from the pgserver package) is
killed mid-study (the driver SIGKILLed: Ray and the servers left as a crash leaves them) and resumed without re-running
a finished trial or leaving a server behind, the same way as on SQLite (the same Optuna storage code; the SQLite resume
is the search e2e test's); a second results directory cannot mix into it. The server is the session's
(``postgres_url`` in tests/conftest.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from autotune.core.errors import AutotuneError
from autotune.study.storage import redact_url
from tests.conftest import free_port
from tests.test_search_e2e import STUDY

pytestmark = pytest.mark.slow


def _argv(space: Path, results: Path, url: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autotune.search",
        "--space",
        str(space),
        "--finalists",
        "0",
        "--results-dir",
        str(results),
        "--storage",
        url,
        "--dashboard-port",
        str(free_port()),
        "--serve-port",
        str(free_port()),
        *extra,
    ]


def test_redacted_url() -> None:
    assert redact_url("postgresql://alice:s3cret@db:5432/x") == "postgresql://alice:***@db:5432/x"
    assert redact_url("sqlite:///a/b.db") == "sqlite:///a/b.db"


@pytest.mark.xdist_group("postgres")  # with the other test of the session's PostgreSQL server: one server
def test_postgres_study_killed_and_resumed(tmp_path: Path, postgres_url: str) -> None:
    study = json.loads(json.dumps(STUDY))
    study["study"].update(name="pg", trials=2)  # killed after the first record: the rerun keeps it and runs the other
    study["params"]["mem_fraction_static"]["choices"] = [0.7, 0.8]
    study["load_levels"] = [1]
    space = tmp_path / "pg.yaml"
    space.write_text(yaml.safe_dump(study))
    results = tmp_path / "results"
    records = results / "pg" / "trials.jsonl"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "AUTOTUNE_SERVER_REGISTRY": str(tmp_path / "registry")}

    driver = subprocess.Popen(
        _argv(space, results, postgres_url),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and driver.poll() is None:
            if records.exists() and records.read_text().count("\n") >= 1:
                break
            time.sleep(0.2)
        assert records.exists(), driver.communicate(timeout=5)[0] if driver.poll() is not None else "no record"
        os.kill(driver.pid, signal.SIGKILL)  # as a crash would: no cleanup, trials left RUNNING in the database
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    leftovers = subprocess.run(["pgrep", "-g", str(driver.pid)], capture_output=True, text=True).stdout.split()
    if leftovers:  # the killed driver's own Ray head processes
        subprocess.run(["kill", "-9", *leftovers], check=False)
    first = [json.loads(x) for x in records.read_text().splitlines()]
    assert not (results / "pg" / "study.db").exists(), "the study went to SQLite, not to --storage"

    proc = subprocess.run(_argv(space, results, postgres_url), env=env, capture_output=True, text=True, timeout=420)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert f"{len(first)} finished trial(s) kept" in out and "Optuna study 'pg' in postgresql://" in out
    final = [json.loads(x) for x in records.read_text().splitlines()]
    assert len(final) == 2
    assert [r["trial_id"] for r in final[: len(first)]] == [r["trial_id"] for r in first], "finished trials re-run"
    registry = tmp_path / "registry"
    assert not list(registry.glob("*.json")), "a server of this study is still registered as running"

    stored = optuna.load_study(study_name="pg", storage=postgres_url)
    measured = [
        t for t in stored.trials if t.state == optuna.trial.TrialState.COMPLETE and "duplicate_of" not in t.user_attrs
    ]
    assert sorted(t.user_attrs["trial_id"] for t in measured) == sorted(r["trial_id"] for r in final)
    assert not [t for t in stored.trials if t.state == optuna.trial.TrialState.RUNNING], "a killed trial left running"
    assert stored.metric_names == ["output_tok_per_s@max"]

    # another results directory with the same study name is refused before anything runs
    from autotune.space import load_study
    from autotune.study.storage import open_shared_study

    with pytest.raises(AutotuneError, match="another results directory uses that study name"):
        open_shared_study(load_study(space), postgres_url, [], default=False)
