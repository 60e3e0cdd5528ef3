"""Partial cases of the failure matrix: bad inputs become one-line errors before Ray starts, or say what happened."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from ray.tune.search import Searcher

from autotune.search import main
from autotune.space import load_study
from autotune.study.optuna_study import open_study
from autotune.study.searcher import OptunaStudySearcher

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "search_spaces" / "smoke.yaml"


def _jsonl_study(tmp_path: Path, text: str) -> Path:
    (tmp_path / "prompts.jsonl").write_text(text)
    doc = yaml.safe_load(SMOKE.read_text())
    doc["workload"] = {"kind": "jsonl", "path": "prompts.jsonl", "output_len": 16}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("text", "expect"),
    [
        ('{"prompt": "hello"}\n{"prompt": "cut off\n', "line 2: invalid JSON"),
        ("", "no rows"),
        ('{"prompt": "a"}\n["not", "an", "object"]\n', "line 2: expected a JSON object"),
    ],
)
def test_bad_workload_file_fails_validate_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expect: str
) -> None:
    assert main(["--space", str(_jsonl_study(tmp_path, text)), "--validate-only"]) == 2
    err = capsys.readouterr().err
    assert expect in err and "workload.path" in err and "Traceback" not in err


def test_300_character_study_name_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--space", str(SMOKE), "--study", "s" * 300, "--validate-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "300 characters" in err and err.count("\n") == 1


def test_ray_address_with_no_cluster_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    t0 = time.monotonic()
    assert main(["--space", str(SMOKE), "--results-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 30
    assert "could not connect to the Ray cluster" in err and "RAY_ADDRESS" in err and "Traceback" not in err


def test_address_auto_with_no_cluster_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ray._private import services

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(services, "canonicalize_bootstrap_address", lambda addr, temp_dir=None: None)
    assert main(["--space", str(SMOKE), "--results-dir", str(tmp_path), "--address", "auto"]) == 2
    err = capsys.readouterr().err
    assert "--address auto: no running Ray cluster" in err and "Traceback" not in err


def test_read_only_results_path_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:  # root writes into a 0500 directory; /sys refuses even root
        results = Path("/sys/autotune-results")
    else:
        results = tmp_path / "ro"
        results.mkdir(mode=0o500)
    assert main(["--space", str(SMOKE), "--results-dir", str(results)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot use") and "--results-dir" in err and "Traceback" not in err


def test_stop_after_s_is_reported_as_what_ended_the_study(tmp_path: Path) -> None:
    spec = load_study(SMOKE)
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    s = OptunaStudySearcher(
        spec,
        study,
        budget=5,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("unexpected"),
        stop_after_s=0.01,
    )
    time.sleep(0.05)
    assert s.suggest("a") == Searcher.FINISHED
    assert s.timed_out


def test_an_unusable_registry_directory_is_a_one_line_error_before_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 28: an unwritable registry directory surfaced as an unexplained deploy_error of every trial."""
    from autotune.study import driver as driver_mod
    from autotune.trial import registry

    (tmp_path / "a-file").write_text("not a directory")
    bad = tmp_path / "a-file" / "registry"  # cannot be created, whoever runs this (root included)
    monkeypatch.setattr(registry, "DEFAULT_DIR", bad)
    monkeypatch.setattr(driver_mod.StudyDriver, "_run_tune", lambda *a, **k: pytest.fail("must not start Ray"))
    assert main(["--space", str(SMOKE), "--results-dir", str(tmp_path / "results"), "--verbose"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "AUTOTUNE_SERVER_REGISTRY" in err and str(bad) in err, err
    with pytest.raises(registry.RegistryError, match="AUTOTUNE_SERVER_REGISTRY"):
        registry.register(os.getpid(), "owner", ["x"], directory=bad)


def test_the_time_box_keeps_the_finalist_stage_its_time(tmp_path: Path) -> None:
    from autotune.progress.console import Console
    from autotune.study.driver import StudyDriver

    spec = load_study(SMOKE)
    study = open_study(spec, f"sqlite:///{tmp_path / 'study.db'}")
    reserve = [0.0]
    s = OptunaStudySearcher(
        spec,
        study,
        budget=5,
        on_record=lambda r, log: None,
        make_missing_record=lambda *a: pytest.fail("unexpected"),
        stop_after_s=60.0,
        reserve_s=lambda: reserve[0],
    )
    first = s.suggest("a")
    assert isinstance(first, dict) and first["params"] == spec.baseline  # the baseline is the first launch
    reserve[0] = 59.0  # the finalist stage needs all but a second of the box: no new trial
    time.sleep(1.1)
    assert s.suggest("b") == Searcher.FINISHED and s.timed_out

    said: list[str] = []
    console = Console()
    console.say = said.append  # type: ignore[method-assign]
    driver = StudyDriver(spec, results_dir=tmp_path / "r", stop_after_s=300.0, console=console)
    box = driver.timebox
    assert box.launches == (3 + 1) * 2  # the top 3 and the baseline, twice each
    assert box.reserve_s() == 0.0  # not known before a trial has finished
    for wall in (10.0, 12.0, 8.0):
        if said_now := box.add_trial(wall):
            said.append(said_now)
    assert box.reserve_s() == 10.0 * 8  # the median trial, 8 relaunches one at a time
    assert not box.no_stage_room and not said
    short = StudyDriver(spec, results_dir=tmp_path / "r2", stop_after_s=60.0, console=console).timebox
    said.append(short.add_trial(10.0))
    assert "cannot hold the finalist stage" in short.no_stage_room and "Give at least" in said[-1]
    assert short.reserve_s() == 0.0  # the search then runs the whole box
