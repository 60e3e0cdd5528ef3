"""rayservice.yaml: KubeRay's RayService for the best trial, validated against KubeRay's published CRD schema, with the
same Serve application as serve_config.yaml."""

from __future__ import annotations

from dataclasses import replace

import yaml

from autotune.export import export_study
from autotune.export.command import exported_server
from autotune.export.rayservice import k8s_name, rayservice_manifest
from tests.deploy.kuberay_schema import errors
from tests.export.conftest import MULTINODE_ARGV, with_argv


def _doc(text: str) -> dict:
    return yaml.safe_load(text)


def test_export_writes_a_valid_rayservice_beside_serve_config(tmp_path, records, objectives, levels):
    result = export_study(tmp_path, study_name="demo study", objectives=objectives, records=records, load_levels=levels)
    assert result.rayservice is not None and result.rayservice.parent == result.serve_config.parent
    doc = _doc(result.rayservice.read_text())
    assert errors(doc) == []
    serve_v2 = yaml.safe_load(doc["spec"]["serveConfigV2"])
    served = yaml.safe_load(result.serve_config.read_text())
    # the same app as serve_config.yaml; KubeRay, not the file, sets the proxy's host and port
    assert "http_options" not in serve_v2
    assert serve_v2["applications"] == served["applications"]
    cluster = doc["spec"]["rayClusterConfig"]
    assert cluster["authOptions"] == {"mode": "token"}
    (group,) = cluster["workerGroupSpecs"]
    gpus = int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    assert gpus == served["applications"][0]["deployments"][0]["ray_actor_options"]["num_gpus"]


def test_secret_variables_come_from_a_secret_not_the_file(record_factory, real_engine):
    rec = replace(record_factory(0, tputs={1: 60}, env={"HF_TOKEN": "hf_abc", "NCCL_ALGO": "Ring"}), engine=real_engine)
    server = exported_server(rec)
    doc = rayservice_manifest(rec, server.production, study_name="s", secret_env=("HF_TOKEN",))
    assert errors(doc) == []
    assert "hf_abc" not in yaml.safe_dump(doc)
    (worker,) = doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"]
    assert worker["env"] == [
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "s-best-env", "key": "HF_TOKEN"}}}
    ]


def test_name_is_a_dns_label():
    name = k8s_name("My Study_2026 / speculative " * 4)
    assert len(name) <= 63 and name == name.lower() and name[0].isalnum() and name[-1].isalnum()
    assert all(c.isalnum() or c == "-" for c in name)


def test_schema_check_catches_a_wrong_type(record_factory, real_engine):
    rec = replace(record_factory(0, tputs={1: 60}), engine=real_engine)
    doc = rayservice_manifest(rec, exported_server(rec).production, study_name="s")
    doc["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] = "one"
    assert any("replicas" in e for e in errors(doc))


def test_multinode_server_gets_a_worker_pod_per_node(record_factory, real_engine):
    """A TP-16 server over 2 nodes: two worker pods of 8 GPUs (one per node rank), not one pod of 16 GPUs."""
    rec = with_argv(replace(record_factory(0, tputs={1: 60}), engine=real_engine), MULTINODE_ARGV)
    doc = rayservice_manifest(rec, exported_server(rec).production, study_name="s")
    assert errors(doc) == []
    (group,) = doc["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert group["replicas"] == group["minReplicas"] == group["maxReplicas"] == 2
    (worker,) = group["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "8"
    (app,) = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]
    (dep,) = app["deployments"]
    assert dep["placement_group_bundles"] == [{"CPU": 1, "GPU": 8}] * 2 and app["args"]["nnodes"] == 2
    assert "10.9.8.7:45678" not in doc["spec"]["serveConfigV2"]


def test_a_secret_flag_left_out_is_named_in_the_header(record_factory, real_engine):
    """The serve app leaves out a secret flag's value (--api-key); rayservice.yaml used to say nothing of it, so the
    server measured behind an API key was deployed on Kubernetes without one, silently."""
    from autotune.core.secrets import REDACTED
    from autotune.export.rayservice import render_rayservice

    rec = replace(record_factory(0, tputs={1: 60}, flags={"api-key": REDACTED}), engine=real_engine)
    text = render_rayservice(rec, exported_server(rec).production, study_name="s", header=[])
    assert "--api-key" not in yaml.safe_load(text)["spec"]["serveConfigV2"]
    assert "# Secret flags not stored here: --api-key" in text


def test_the_engine_binds_the_pods_loopback_whatever_host_the_trial_used(record_factory, real_engine):
    """A study run with server.host 0.0.0.0 (or a node's address): the app's host was set to loopback but its argv
    kept ``--host 0.0.0.0``, so SGLang listened on every interface of the pod, beside Serve's proxy (with a node's
    address it could not bind in the pod at all)."""
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp-size", "8", "--host", "0.0.0.0"]
    rec = with_argv(replace(record_factory(0, tputs={1: 60}), engine=real_engine), argv)
    doc = rayservice_manifest(rec, exported_server(rec).production, study_name="s")
    (app,) = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"]
    argv = app["args"]["argv"]
    assert argv[argv.index("--host") + 1] == app["args"]["host"] == "127.0.0.1"


def test_name_is_one_kuberay_accepts():
    """KubeRay's controller refuses a RayService whose name is longer than 47 characters (it appends 6 for the
    RayCluster, and "-serve-svc" must still fit a Service name) or is not a DNS-1035 label (it must start with a
    letter); the name used to be up to 62 characters and could start with a digit, and the RayService never came up."""
    for study in ("2026-kimi-k2.5", "kimi-k2.5-int4-eagle3-speculative-h200-tp8-full-study", "_"):
        name = k8s_name(study)
        assert len(name) <= 47 and name[0].isalpha() and name.endswith("-best"), name
