"""tools/device/fidelity_pool.py: pooling the runs.jsonl of several fidelity checks (CPU only)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from tools.device.fidelity import Run
from tools.device.fidelity_pool import load_runs, main, noise, paired


def run(client: str, repeat: int, tput: float) -> Run:
    return Run(client, repeat, tput, 20.0, 5.0, 6.0, 8, 0, 1.0, mean_ttft_ms=30.0)


def write(d: Path, runs: list[Run]) -> Path:
    d.mkdir()
    (d / "runs.jsonl").write_text("".join(json.dumps(asdict(r)) + "\n" for r in runs))
    return d


def test_pairs_stay_within_their_check(tmp_path: Path) -> None:
    a = write(
        tmp_path / "a", [run("autotune", 0, 102), run("sglang", 0, 100), run("sglang", 1, 100), run("autotune", 1, 104)]
    )
    b = write(tmp_path / "b", [run("autotune", 0, 99), run("sglang", 0, 100)])  # repeat 0 again: another check's pair
    runs = load_runs([a, b])
    assert sorted({r.repeat for r in runs}) == [0, 1, 1000]
    p = paired(runs, "output_tok_per_s")
    assert p is not None and p.pairs == 3 and p.mean_rel_diff == pytest.approx((0.02 + 0.04 - 0.01) / 3)
    assert p.ci95 is not None and p.ci95[0] < p.mean_rel_diff < p.ci95[1]
    assert paired(runs, "median_itl_ms").mean_rel_diff == 0  # type: ignore[union-attr]


def test_runs_needed_grow_with_noise_and_vanish_outside_the_tolerance() -> None:
    quiet = [run("autotune", i, 100 + (i % 2)) for i in range(4)] + [run("sglang", i, 100 + (i % 2)) for i in range(4)]
    loud = [run("autotune", i, 100 + 10 * (i % 2)) for i in range(4)] + [
        run("sglang", i, 100 + 10 * (i % 2)) for i in range(4)
    ]
    n_quiet = noise(quiet, "output_tok_per_s", 0.0, 0.03).runs_needed
    n_loud = noise(loud, "output_tok_per_s", 0.0, 0.03).runs_needed
    assert n_quiet is not None and n_loud is not None and n_quiet < n_loud
    assert noise(loud, "output_tok_per_s", 0.05, 0.03).runs_needed is None  # the estimate itself is outside


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(
        tmp_path / "a", [run("autotune", 0, 101), run("sglang", 0, 100), run("sglang", 1, 99), run("autotune", 1, 100)]
    )
    out = tmp_path / "pooled.md"
    assert main([str(a), "--out", str(out)]) == 0
    text = out.read_text()
    assert "2 autotune runs, 2 bench_serving runs" in text and "| median_itl_ms | +0.0% |" in text
    assert main([str(tmp_path / "nothing")]) == 2 and "runs.jsonl is missing" in capsys.readouterr().err
