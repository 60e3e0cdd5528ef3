"""Profiles load from data files; malformed ones fail with a message naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.sim.args import parse_args
from autotune.sim.profile import ProfileError, list_profiles, load_profile, profile_gpus


def test_shipped_profiles_load() -> None:
    names = list_profiles()
    assert {"kimi-k2.5-int4-8x-rtxpro6000", "h200-llama-1b", "h200x2-llama-8b"} <= set(names)
    for name in names:
        p = load_profile(name)
        assert p.name == name and p.calibration and p.hardware.gpu_count >= 1


def test_kimi_profile_has_both_drafters() -> None:
    p = load_profile("kimi-k2.5-int4-8x-rtxpro6000")
    assert p.drafter_for("/models/public-k2-eagle3") is not None
    assert p.drafter_for("custom-k25-eagle3").name == "custom-k25-eagle3"  # type: ignore[union-attr]
    assert p.drafter_for("/models/other") is None
    assert load_profile("h200-llama-1b").drafter_for("/anything") is not None  # dummy drafter matches any path


def test_unknown_profile_and_unknown_key(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="unknown sim profile"):
        load_profile("no-such-profile")
    src = (Path(load_profile.__code__.co_filename).parent / "profiles" / "h200-llama-1b.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.replace("  gpu_count: 1\n", "  gpu_count: 1\n  gpu_colour: green\n"))
    with pytest.raises(ProfileError, match=r"bad.yaml: hardware: unknown key\(s\) \['gpu_colour'\]"):
        load_profile(str(bad))


def test_flag_aliases_match_sglang() -> None:
    a = parse_args(["--model-path", "m", "--tp", "2", "--cuda-graph-max-bs", "32"])
    b = parse_args(["--model-path", "m", "--tp-size", "2", "--cuda-graph-max-bs-decode", "32"])
    assert a == b and a.host == "127.0.0.1"
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model-path", "m", "--tp-siz", "2"])  # no abbreviations
    assert exc.value.code == 2


def test_a_sim_profile_declares_its_gpu_count() -> None:
    # the local node of a simulated study declares the profile's GPUs: 8 for an 8-GPU profile, 2 for a 2-GPU one
    assert profile_gpus("kimi-k2.5-int4-8x-rtxpro6000") == 8
    assert profile_gpus("h200x2-llama-8b") == 2
    assert profile_gpus("no-such-profile") is None
