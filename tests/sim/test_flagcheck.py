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


def test_a_server_wider_than_the_profiles_node_is_named_before_any_launch(capsys) -> None:  # type: ignore[no-untyped-def]
    """Every launch of it would fail (`invalid device ordinal`, as SGLang's); the run is refused before Ray starts."""
    spec = load_study(SPACES / "smoke.yaml")  # h200-llama-1b: one GPU a node
    wide = replace(spec, server=spec.server.model_copy(update={"tp_size": 3}))
    (problem,) = check_engine_flags(wide).problems
    assert problem.startswith("server.tp_size: each server needs 3 GPU(s) (tp_size x dp-size) over 1 node(s)")
    assert "'h200-llama-1b' has 1 a node" in problem and "kimi-k2.5-int4-8x-rtxpro6000: 8" in problem
    spans = replace(spec, server=spec.server.model_copy(update={"tp_size": 2, "nnodes": 2}))
    assert check_engine_flags(spans).problems == ()  # one GPU on each of two nodes
    assert main(["--tp-size", "3", "--results-dir", "/nonexistent/never-written"]) == 2
    assert "every launch would fail" in capsys.readouterr().err
