"""``python -m autotune.calibrate``: table arithmetic, JSON shape, and one real run through launcher + benchmark."""

from __future__ import annotations

import json

import pytest

from autotune import calibrate
from autotune.bench.types import BenchResult, Dist, LevelSummary


def _level(c: int, tok_s: float, accept: float | None = None, tpot_ms: float = 2.0) -> LevelSummary:
    d = Dist(mean=tpot_ms, median=tpot_ms, p90=tpot_ms, p99=tpot_ms, count=1)
    return LevelSummary(c, 4, 0, 1.0, tok_s, 1.0, 1.0, d, d, d, d, accept)


def test_measure_reads_levels_peak_and_acceptance() -> None:
    bench = BenchResult(levels=(_level(1, 60.0, 1.6), _level(128, 900.0, 1.7)), server_accept_length=1.68)
    assert calibrate._measure("tok_s@1", bench, None) == 60.0
    assert calibrate._measure("peak_tok_s", bench, None) == 900.0
    assert calibrate._measure("per_request_tok_s@1", bench, None) == pytest.approx(500.0)
    assert calibrate._measure("accept_length", bench, 4) == 1.68
    assert calibrate._measure("accept_rate", bench, 4) == pytest.approx(0.42)


def test_json_output_and_exit_status(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def fake_case(suite, case, seed, log_dir):  # type: ignore[no-untyped-def]
        rows = [
            calibrate.Row(case.config, t.metric, t.reported, t.reported * 1.2, 0.2, False, t.source)
            for t in case.targets
        ]
        return rows, None

    monkeypatch.setattr(calibrate, "run_case", fake_case)
    rc = calibrate.main(["--profile", "kimi-k2.5-int4-8x-rtxpro6000", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["ok"] is False and out["simulated"] is True
    assert {"config", "metric", "reported", "measured", "rel_err"} <= set(out["rows"][0])
    assert {r["config"] for r in out["rows"]} == {
        "sglang-no-spec",
        "eagle3-public-k2-drafter",
        "eagle3-custom-k25-drafter",
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--only", "sglang-no-spec", "eagle3-typo"],
            "error: --only eagle3-typo: not a configuration of the kimi-k2.5-int4-8x-rtxpro6000 table; use any of "
            "sglang-no-spec, eagle3-public-k2-drafter, eagle3-custom-k25-drafter",
        ),
        (["--seed", "-1"], "error: --seed must be 0 or more, got -1"),
    ],
)
def test_a_bad_value_is_an_error_not_a_pass(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    monkeypatch.setattr(calibrate, "run_case", lambda *a: pytest.fail("nothing may run"))
    assert calibrate.main(["--profile", "kimi-k2.5-int4-8x-rtxpro6000", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message), err


def test_real_run_on_the_h200_profile() -> None:
    report = calibrate.calibrate("h200-llama-1b")
    assert not report.errors, report.errors
    assert report.rows and all(r.measured is not None for r in report.rows)
    assert report.ok, calibrate.format_table(report)
