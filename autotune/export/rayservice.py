"""``rayservice.yaml``: a KubeRay ``RayService`` that serves the best configuration on Kubernetes.

Its ``serveConfigV2`` holds the same Serve application as ``serve_config.yaml`` (``autotune.export.serve_config``: the
``EngineServer`` deployment running the production SGLang command); its ``rayClusterConfig`` is a CPU-only head and
one GPU worker group whose pods have the GPUs one replica reserves (tensor parallel x data parallel), one pod per node
of a multi-node server (``--nnodes``: that many pods, each with its node's share of the GPUs), with Ray's token
authentication on (KubeRay's ``authOptions``, Ray 2.52+). Serve's HTTP proxy is left at KubeRay's default (every
interface of the pod, behind the RayService's Kubernetes Service); the engine itself listens on the pod's loopback.

The manifest is plain data; ``tests/export/test_rayservice.py`` validates it against KubeRay's published CRD schema
(vendored in ``deploy/kuberay/crd-schemas``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import yaml

from autotune.export.command import ServerCommand
from autotune.export.serve_config import per_node_gpus, serve_app_args, serve_config, validate_serve_config
from autotune.trial.records import TrialRecord

API_VERSION = "ray.io/v1"
DEFAULT_IMAGE = "autotune:latest"  # an image with Ray, SGLang and autotune installed (deploy/Dockerfile)
RAYSERVICE_YAML = "rayservice.yaml"
# KubeRay refuses a longer RayService name (MaxRayServiceNameLength): its RayCluster appends 6 characters, and
# "<cluster>-serve-svc" must still fit a Service name
MAX_NAME = 47


def k8s_name(study_name: str, suffix: str = "best") -> str:
    """A RayService name for the study that KubeRay accepts: a DNS-1035 label (lower case, digits and '-', starts with
    a letter, ends alphanumeric) of at most ``MAX_NAME`` characters."""
    slug = re.sub(r"[^a-z0-9-]+", "-", study_name.lower()).strip("-") or "study"
    slug = slug if slug[0].isalpha() else f"study-{slug}"
    return f"{slug[: MAX_NAME - 1 - len(suffix)].rstrip('-')}-{suffix}"


def ray_version() -> str:
    import ray

    return str(ray.__version__)


def _container(name: str, image: str, resources: dict[str, str], env: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": image, "resources": {"limits": resources, "requests": resources}}
    if env:
        out["env"] = env
    return out


def rayservice_manifest(
    record: TrialRecord,
    cmd: ServerCommand,
    *,
    study_name: str,
    image: str = DEFAULT_IMAGE,
    secret_env: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The RayService document for trial ``record`` run as ``cmd`` (the production SGLang command).

    ``secret_env``: variables the server needs whose values are not exported; each is read from a Kubernetes Secret
    named ``<name>-env`` (key = the variable's name) that the user creates."""
    # the engine on the pod's loopback, behind Serve's proxy, whatever address the trial's server bound
    args = serve_app_args(record, replace(cmd, host="127.0.0.1"), study_name=study_name)
    serve_doc = serve_config(args)
    validate_serve_config(serve_doc)
    serve_v2 = {"applications": serve_doc["applications"]}  # KubeRay sets the HTTP proxy's host and port
    name = k8s_name(study_name)
    gpus = max(1, per_node_gpus(args))  # a pod per node of the server: a multi-node server gets nnodes workers
    nodes = max(1, args.nnodes)
    secret = f"{name}-env"
    env = [{"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k}}} for k in secret_env]
    head = _container("ray-head", image, {"cpu": "4", "memory": "16Gi"}, [])
    head["ports"] = [
        {"containerPort": 6379, "name": "gcs-server"},
        {"containerPort": 8265, "name": "dashboard"},
        {"containerPort": 8000, "name": "serve"},
    ]
    worker = _container(
        "ray-worker", image, {"cpu": str(8 * gpus), "memory": f"{64 * gpus}Gi", "nvidia.com/gpu": str(gpus)}, env
    )
    shm = {"name": "dshm", "emptyDir": {"medium": "Memory"}}  # NCCL and SGLang need more than the default 64 MiB
    worker["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return {
        "apiVersion": API_VERSION,
        "kind": "RayService",
        "metadata": {
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "autotune", "autotune/trial": str(record.number)},
        },
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve_v2, sort_keys=False, default_flow_style=False, width=1000),
            "rayClusterConfig": {
                "rayVersion": ray_version(),
                "authOptions": {"mode": "token"},
                "headGroupSpec": {
                    "rayStartParams": {"num-gpus": "0"},  # the head runs Serve's controller, not the engine
                    "template": {"spec": {"containers": [head]}},
                },
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": nodes,
                        "minReplicas": nodes,
                        "maxReplicas": nodes,
                        "rayStartParams": {},  # KubeRay reads the GPUs from the container's nvidia.com/gpu limit
                        "template": {"spec": {"containers": [worker], "volumes": [shm]}},
                    }
                ],
            },
        },
    }


def render_rayservice(
    record: TrialRecord,
    cmd: ServerCommand,
    *,
    study_name: str,
    header: list[str],
    secret_env: tuple[str, ...] = (),
    image: str = DEFAULT_IMAGE,
) -> str:
    doc = rayservice_manifest(record, cmd, study_name=study_name, image=image, secret_env=secret_env)
    name = doc["metadata"]["name"]
    lines = [
        *header,
        "# KubeRay RayService (KubeRay 1.5.1+, Ray 2.52+ for token auth): the Serve app of serve_config.yaml on Kubernetes.",
        f"# Set the image: Ray {ray_version()}, SGLang and autotune installed (deploy/Dockerfile), replacing {image}.",
    ]
    if secret_env:
        lines.append(
            f"# Secret variables come from the Secret {name}-env: kubectl create secret generic {name}-env "
            + " ".join(f"--from-literal={k}=..." for k in secret_env)
        )
    secret_flags = [f"--{k}" for k in cmd.secret_flags]
    if secret_flags:
        lines.append(
            f"# Secret flags not stored here: {', '.join(secret_flags)}. Add them with their values to "
            "serveConfigV2's applications[0].args.argv where you deploy it (autotune does not store secrets)."
        )
    route = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"][0]["route_prefix"]
    lines += [
        f"#   kubectl apply -f {RAYSERVICE_YAML}      # then: kubectl get rayservice {name}",
        f"#   the app answers on the Service {name}-serve-svc, port 8000, route {route} (docs/kubernetes.md)",
    ]
    return "\n".join(lines) + "\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
