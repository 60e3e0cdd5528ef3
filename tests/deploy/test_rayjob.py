"""deploy/rayjob-study.yaml against KubeRay's published RayJob schema, and what the study needs from it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from autotune.search import build_parser
from tests.deploy.kuberay_schema import errors

ROOT = Path(__file__).resolve().parents[2]
RAYJOB = ROOT / "deploy" / "rayjob-study.yaml"


@pytest.fixture
def job() -> dict:
    return yaml.safe_load(RAYJOB.read_text())


def test_rayjob_validates_against_kuberay_schema(job: dict) -> None:
    assert errors(job) == []


def test_a_misspelt_field_is_caught(job: dict) -> None:
    job["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replica"] = 2  # not KubeRay's "replicas"
    job["spec"]["backoffLimit"] = "one"
    found = errors(job)
    assert any("replica" in e and "Additional properties" in e for e in found), found
    assert any(e.startswith("spec.backoffLimit") for e in found), found


def test_entrypoint_runs_a_study_on_the_secret_storage(job: dict) -> None:
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "autotune.search"]
    args = build_parser().parse_args(argv[3:])  # the study CLI accepts it as written
    assert args.storage == "$AUTOTUNE_STORAGE" and args.results_dir == "/results"
    assert args.address is None  # the job supervisor's RAY_ADDRESS joins the job's own cluster
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    env = {e["name"]: e for e in head["containers"][0]["env"]}
    assert env["AUTOTUNE_STORAGE"]["valueFrom"]["secretKeyRef"] == {"name": "autotune-postgres", "key": "url"}
    mounts = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}
    claim = {v["name"]: v for v in head["volumes"]}[mounts["/results"]]["persistentVolumeClaim"]["claimName"]
    pvc = yaml.safe_load((ROOT / "deploy" / "results-pvc.yaml").read_text())
    assert claim == pvc["metadata"]["name"]


def test_cpu_only_head_gpu_workers_token_auth(job: dict) -> None:
    cluster = job["spec"]["rayClusterSpec"]
    assert cluster["authOptions"] == {"mode": "token"}
    assert cluster["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    head_limits = cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in head_limits
    for group in cluster["workerGroupSpecs"]:
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) >= 1
    major, minor = (int(x) for x in cluster["rayVersion"].split(".")[:2])
    assert (major, minor) >= (2, 52), "token auth needs Ray 2.52 or newer"
