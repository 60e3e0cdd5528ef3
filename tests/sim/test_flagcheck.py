"""--validate-only's engine checks: flag names against the engine, simulator profile names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotune.search import main
from autotune.sim.flagcheck import check_engine_flags
from autotune.space import SimSpec, load_study

SPACES = Path(__file__).resolve().parents[2] / "search_spaces"


def test_the_shipped_simulated_studies_pass() -> None:
    for name in ("smoke", "speculative", "nccl"):
        check = check_engine_flags(load_study(SPACES / f"{name}.yaml"))
        assert check.problems == (), (name, check.problems)
        assert "simulator's flag list" in check.note


def test_a_flag_typo_and_an_unknown_profile_are_named_with_the_fix() -> None:
    spec = load_study(SPACES / "smoke.yaml")
    bad = replace(
        spec,
        server=spec.server.model_copy(update={"flags": {"attention-backnd": "triton"}}),
        sim=SimSpec(profile="h200-lama-1b", time_scale=10),
    )
    problems = check_engine_flags(bad).problems
    assert any("server.flags: --attention-backnd" in p and "--attention-backend" in p for p in problems), problems
    assert any("unknown simulator profile 'h200-lama-1b'" in p and "'h200-llama-1b'" in p for p in problems), problems


def test_validate_only_exits_2_on_an_unknown_profile(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--validate-only", "--profile", "no-such-profile"]) == 2
    assert "unknown simulator profile" in capsys.readouterr().err
    assert main(["--validate-only"]) == 0
    assert "baseline (your current configuration" in capsys.readouterr().out
