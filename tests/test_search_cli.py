"""The CLI's edges that need no Ray: bad files, validation only, a busy port."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from autotune.search import main

ROOT = Path(__file__).resolve().parents[1]


def test_validate_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--space", str(ROOT / "search_spaces" / "smoke.yaml"), "--validate-only"]) == 0
    assert "valid study 'smoke'" in capsys.readouterr().out


def test_bad_file_fails_before_ray_with_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "study: {name: x, engine: sim, trails: 3}\nsim: {profile: h200-llama-1b}\nload_levels: [1]\n"
        "params: {m: {flag: mem-fraction-static, type: float, low: 0.9, high: 0.5}}\n"
    )
    assert main(["--space", str(bad), "--results-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "study.trails" in err and "did you mean `trials`" in err
    assert not (tmp_path / "r").exists(), "nothing may be written for an invalid study"


def test_busy_dashboard_port_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        code = main(["--results-dir", str(tmp_path), "--dashboard-port", str(port)])
    assert code == 2
    assert f"port {port} on 127.0.0.1 is in use" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-concurrent", "0"], "--max-concurrent must be 1 or more (leave it out for no cap), got 0"),
        (["--num-gpus", "-1"], "--num-gpus must be 0 or more, got -1"),
        (["--stop-after-s", "-5"], "--stop-after-s must be a number of seconds above 0, got -5"),
        (["--dashboard-port", "99999"], "--dashboard-port must be a TCP port, 1-65535, got 99999"),
        (["--serve-port", "0"], "--serve-port must be a TCP port, 1-65535, got 0"),
        (["--metrics-port", "70000"], "--metrics-port must be a TCP port, 1-65535, got 70000"),
        (["--finalists", "-1"], "--finalists must be 0 (no finalist stage) or more, got -1"),
        (["--seed", "-1"], "study.seed (given on the command line): -1 is out of range"),
        (["--profile", "h200-lama-1b"], "unknown simulator profile 'h200-lama-1b'"),
        (["--fresh", "--finalists-only"], "--fresh and --finalists-only contradict each other"),
        (["--address", "127.0.0.1:1", "--num-gpus", "2"], "--num-gpus sets up the local Ray node this command"),
        (["--address", "auto", "--metrics-port", "9100"], "but --address joins a running cluster"),
    ],
)
def test_a_bad_command_line_value_stops_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    """A value the study cannot run with is an error naming the flag before Ray starts, not a study that fails,
    runs nothing or ignores it (a bad simulator profile is checked for a run, not only by --validate-only)."""
    assert main(["--results-dir", str(tmp_path / "r"), *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err, err
    assert not (tmp_path / "r").exists(), "nothing may be written for a bad command line"


def test_a_sim_run_without_a_profile_names_the_flag_that_gives_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = yaml.safe_load((ROOT / "search_spaces" / "smoke.yaml").read_text())
    doc["study"]["engine"] = "sglang"
    del doc["sim"]  # a study written for SGLang, run on the simulator
    study = tmp_path / "real.yaml"
    study.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["--space", str(study), "--engine", "sim", "--validate-only"]) == 2
    err = capsys.readouterr().err
    assert "(or pass --profile)" in err, err
    assert main(["--space", str(study), "--engine", "sim", "--profile", "h200-llama-1b", "--validate-only"]) == 0


def test_json_says_the_time_box_ended_the_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--json` names why a time-boxed run stopped before its budget, as the console does (a smoke study with
    --stop-after-s 45 ran 1 of 12 trials and its summary said exit 0, stop_reason "" and stopped_early "")."""
    from autotune.study import driver as driver_module

    class TimeBoxed(driver_module.StudyDriver):
        def run(self) -> int:
            self.store.ensure()
            self.store.write_json("study.json", {"name": self.spec.name, "trials": self.spec.trials})
            self.time_box_note = self.timebox.stopped_note(1, self.spec.trials)
            return 0

    monkeypatch.setattr(driver_module, "StudyDriver", TimeBoxed)
    args = ["--space", "smoke", "--results-dir", str(tmp_path), "--stop-after-s", "45", "--json"]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stop_reason"].startswith("STOPPED by --stop-after-s 45")
    assert "1 of 12 trial(s) done" in doc["stop_reason"]
