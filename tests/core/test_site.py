"""Site policy (autotune.core.site): the site's multicast variables reach every server; without them autotune adds none."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autotune.core import site
from autotune.core.trial import LaunchSpec, TrialConfig
from autotune.engines import get_engine
from autotune.engines.base import RAY_INJECTED_ENV
from autotune.trial.launcher import ServerProcess, build_env

SITE_MULTICAST_OFF = dict(site.MULTICAST_VARS)  # the values the conftest fixture sets
CFG = TrialConfig(model_path="/models/m", tp_size=1, flags={"page-size": 1}, env={"NCCL_ALGO": "allreduce:ring"})
ENGINES = [("sglang", {"python": "python3"}), ("sim", {"profile": "h200-llama-1b", "python": "python3"})]


def test_policy_reads_the_parent_environment() -> None:
    policy = site.site_policy({"NCCL_NVLS_ENABLE": "0", "PATH": "/bin"})
    assert dict(policy.env) == {"NCCL_NVLS_ENABLE": "0"} and policy.multicast_off
    assert not site.site_policy({}).multicast_off and not site.site_policy({}).env


@pytest.mark.parametrize(("name", "options"), ENGINES)
def test_every_engine_keeps_the_site_variables(name: str, options: dict, site_multicast_off: dict[str, str]) -> None:
    spec = get_engine(name, **options).launch_spec(CFG, port=1)
    assert {k: spec.env.get(k) for k in SITE_MULTICAST_OFF} == SITE_MULTICAST_OFF
    assert not set(spec.unset_env) & set(SITE_MULTICAST_OFF)


@pytest.mark.parametrize(("name", "options"), ENGINES)
def test_without_a_site_no_engine_adds_a_multicast_variable(name: str, options: dict, no_site: None) -> None:
    spec = get_engine(name, **options).launch_spec(CFG, port=1)
    assert not set(spec.env) & set(SITE_MULTICAST_OFF)
    assert dict(spec.env) == {"NCCL_ALGO": "allreduce:ring"}


def test_a_study_cannot_override_a_site_variable(site_multicast_off: dict[str, str]) -> None:
    cfg = TrialConfig(model_path="m", tp_size=1, env={"NCCL_NVLS_ENABLE": "1"})
    with pytest.raises(site.SiteError, match="overrides the site's NCCL_NVLS_ENABLE=0"):
        get_engine("sim").launch_spec(cfg, port=1)
    same = TrialConfig(model_path="m", tp_size=1, env={"NCCL_NVLS_ENABLE": "0"})
    assert get_engine("sim").launch_spec(same, port=1).env["NCCL_NVLS_ENABLE"] == "0"


def test_without_a_site_nvls_is_a_study_setting(no_site: None) -> None:
    cfg = TrialConfig(model_path="m", tp_size=1, flags={"enable-nccl-nvls": True}, env={"NCCL_NVLS_ENABLE": "1"})
    spec = get_engine("sglang", python="python3").launch_spec(cfg, port=1)
    assert spec.env["NCCL_NVLS_ENABLE"] == "1" and "--enable-nccl-nvls" in spec.argv


def test_server_environment_never_drops_or_changes_a_site_variable() -> None:
    parent = {**SITE_MULTICAST_OFF, "OMP_NUM_THREADS": "1", "HOME": "/root"}
    env = site.server_environment(
        parent,
        unset=["OMP_NUM_THREADS", "NCCL_NVLS_ENABLE", "NVSHMEM_DISABLE_NVLS"],
        env={"TORCH_SYMM_MEM_DISABLE_MULTICAST": "0", "X": "1"},
    )
    assert {k: env[k] for k in SITE_MULTICAST_OFF} == SITE_MULTICAST_OFF
    assert "OMP_NUM_THREADS" not in env and env["X"] == "1" and env["HOME"] == "/root"
    assert "NCCL_NVLS_ENABLE" not in site.server_environment({"HOME": "/"}, env={"X": "1"})


def test_a_started_server_process_has_the_site_variables(tmp_path: Path, site_multicast_off: dict[str, str]) -> None:
    """The process the launcher starts (for every engine, the Serve replica included) sees the site's values, even
    from a spec that tries to remove or change them."""
    dump = tmp_path / "env.json"
    code = f"import json, os; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))"
    spec = LaunchSpec(
        engine="sim",
        argv=(sys.executable, "-c", code),
        env={"NCCL_NVLS_ENABLE": "1"},
        host="127.0.0.1",
        port=1,
        gpus=0,
        unset_env=("TORCH_SYMM_MEM_DISABLE_MULTICAST", *RAY_INJECTED_ENV),
    )
    server = ServerProcess(spec, tmp_path / "log.txt")
    server.start()
    assert server.proc is not None and server.proc.wait(timeout=30) == 0
    seen = json.loads(dump.read_text())
    assert {k: seen.get(k) for k in SITE_MULTICAST_OFF} == SITE_MULTICAST_OFF
    assert build_env(spec)["NCCL_NVLS_ENABLE"] == "0"
