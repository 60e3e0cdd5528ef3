"""Issue 28 case 5: a hostile study file (an alias bomb, deep nesting, a huge file) is a one-line error, fast and small.

Before: an alias bomb inside an otherwise valid study made ``--validate-only`` grow past 1.5 GB, deep nesting gave a
``RecursionError`` traceback, a 120 MB file ran for minutes."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from autotune.search import main

ROOT = Path(__file__).resolve().parents[2]
SMOKE = (ROOT / "search_spaces" / "smoke.yaml").read_text()


def _with_flag_value(tmp_path: Path, value: str) -> Path:
    """smoke.yaml with one more fixed server flag, ``stream-interval: value``."""
    fixed = "  flags: {attention-backend: triton"
    assert fixed in SMOKE
    text = SMOKE.replace(fixed, f"{fixed}, stream-interval: {value}", 1)
    path = tmp_path / "study.yaml"
    path.write_text(text)
    return path


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and len(err) < 2000, err[:3000]
    assert err.startswith("error: "), err[:300]
    return err


def test_alias_bomb_in_a_flag_value_is_refused_quickly_and_small(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    levels = ["&a0 [lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"&a{i} [{', '.join([f'*a{i - 1}'] * 8)}]" for i in range(1, 8)]  # 8**8 = 16.7 M leaves
    path = _with_flag_value(tmp_path, "[" + ", ".join(levels) + "]")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.monotonic()
    assert main(["--space", str(path), "--validate-only"]) == 2
    took = time.monotonic() - t0
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    err = _one_line_error(capsys)
    assert "alias" in err and str(path) in err
    assert took < 10 and grown_mib < 100, (took, grown_mib)


def test_deep_nesting_is_a_one_line_error_not_a_recursion_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _with_flag_value(tmp_path, "[" * 20000 + "]" * 20000)
    assert main(["--space", str(path), "--validate-only"]) == 2
    err = _one_line_error(capsys)
    assert "nest" in err and str(path) in err


def test_a_huge_study_file_is_refused_before_it_is_parsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(SMOKE + ("# padding " + "x" * 90 + "\n") * 30_000)  # 3 MB: valid YAML, a valid study
    t0 = time.monotonic()
    assert main(["--space", str(path), "--validate-only"]) == 2
    err = _one_line_error(capsys)
    assert "MiB" in err and time.monotonic() - t0 < 5


def test_a_few_aliases_in_an_ordinary_study_still_load(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _with_flag_value(tmp_path, "&v 4, decode-log-interval: *v")
    assert main(["--space", str(path), "--validate-only"]) == 0, capsys.readouterr().err
