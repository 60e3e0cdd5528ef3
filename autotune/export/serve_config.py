"""``serve_config.yaml``: a Ray Serve config (``serve deploy``) running one trial's server through ``serve_app``.

The document is checked against Ray Serve's own schema (``ray.serve.schema.ServeDeploySchema``) before it is written,
including that Serve's model does not silently drop a key we wrote.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from autotune.export.banner import engine_banner
from autotune.export.errors import ExportError
from autotune.export.metrics import argv_value
from autotune.records import TrialRecord
from autotune.secrets import REDACTED, is_secret

IMPORT_PATH = "serve_app.app:build_app"
DEPLOYMENT_NAME = "EngineServer"
SGLANG_DEFAULT_PORT = 30000
DEFAULT_READY_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class ServeAppArgs:
    """The ``args`` that ``serve_app.app:build_app`` takes."""

    name: str
    engine: str  # "sglang" | "sim"
    argv: list[str]
    env: dict[str, str]
    unset_env: list[str]
    host: str
    port: int
    gpus: int
    ready_timeout_s: float


def app_name(study_name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", study_name).strip("-") or "study"
    return f"{slug}-best"


def engine_kind(record: TrialRecord) -> str:
    if record.engine is not None:
        return "sim" if record.engine.simulated else record.engine.engine
    return "sglang" if "sglang.launch_server" in record.argv else "sim"


def server_gpus(record: TrialRecord) -> int:
    """GPUs the replica reserves: 0 for the simulator, else what the engine used (tp x dp from argv as fallback)."""
    if engine_kind(record) == "sim":
        return 0
    if record.engine is not None and record.engine.gpu_count > 0:
        return record.engine.gpu_count
    tp = argv_value(record.argv, "tp-size") or argv_value(record.argv, "tp") or "1"
    dp = argv_value(record.argv, "dp-size") or argv_value(record.argv, "dp") or "1"
    try:
        return int(tp) * int(dp)
    except ValueError as exc:
        raise ExportError(f"trial {record.number}: cannot read --tp-size/--dp-size from argv ({tp!r}, {dp!r})") from exc


def serve_app_args(record: TrialRecord, *, study_name: str, unset_env: Sequence[str] = ()) -> ServeAppArgs:
    port_text = argv_value(record.argv, "port")
    try:
        port = int(port_text) if port_text is not None else SGLANG_DEFAULT_PORT
    except ValueError as exc:
        raise ExportError(f"trial {record.number}: --port {port_text!r} in argv is not an integer") from exc
    ready = record.phases.launch_to_ready_s
    return ServeAppArgs(
        name=app_name(study_name),
        engine=engine_kind(record),
        argv=list(record.argv),
        env={k: v for k, v in record.env.items() if not _secret(k, v)},
        unset_env=list(unset_env),
        host=argv_value(record.argv, "host") or "127.0.0.1",
        port=port,
        gpus=server_gpus(record),
        ready_timeout_s=max(DEFAULT_READY_TIMEOUT_S, 3.0 * ready) if ready else DEFAULT_READY_TIMEOUT_S,
    )


def serve_config(args: ServeAppArgs, *, http_port: int = 8000) -> dict[str, Any]:
    """The Serve deploy document (plain data, as YAML will hold it)."""
    return {
        "http_options": {"host": "127.0.0.1", "port": http_port},
        "applications": [
            {
                "name": args.name,
                "route_prefix": f"/{args.name}",
                "import_path": IMPORT_PATH,
                "args": asdict(args),
                "deployments": [
                    {
                        "name": DEPLOYMENT_NAME,
                        "num_replicas": 1,
                        "ray_actor_options": {"num_gpus": args.gpus, "num_cpus": 1},
                    }
                ],
            }
        ],
    }


def validate_serve_config(doc: dict[str, Any]) -> None:
    """Raise ExportError unless Ray Serve's ServeDeploySchema accepts ``doc`` and keeps every key of it."""
    from pydantic import ValidationError
    from ray.serve.schema import ServeDeploySchema

    try:
        model = ServeDeploySchema.model_validate(doc)
    except ValidationError as exc:
        raise ExportError(f"the generated Serve config does not validate against ServeDeploySchema: {exc}") from exc
    dumped = model.model_dump(mode="json", exclude_unset=True)
    missing = _missing_keys(doc, dumped, "")
    if missing:
        raise ExportError(f"Ray Serve's schema ignores keys of the generated config: {', '.join(missing)}")


def _missing_keys(ours: Any, theirs: Any, path: str) -> list[str]:
    if isinstance(ours, dict):
        if not isinstance(theirs, dict):
            return [path or "."]
        out = []
        for key, value in ours.items():
            sub = f"{path}.{key}" if path else str(key)
            if key not in theirs:
                out.append(sub)
            elif key != "args":  # args is free-form, passed to build_app as is
                out.extend(_missing_keys(value, theirs[key], sub))
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        return [
            m for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) for m in _missing_keys(a, b, f"{path}[{i}]")
        ]
    return []


def render_serve_config(
    record: TrialRecord, *, study_name: str, unset_env: Sequence[str] = (), http_port: int = 8000
) -> str:
    """YAML text with a comment header (engine, trial, how to deploy); validated before it is returned."""
    args = serve_app_args(record, study_name=study_name, unset_env=unset_env)
    doc = serve_config(args, http_port=http_port)
    validate_serve_config(doc)
    header = [
        f"# autotune best configuration: study {' '.join(study_name.split())}, trial {record.number} "
        f"(id {record.trial_id})",
        f"# {engine_banner(record.engine)}",
        "# Deploy on a running Ray cluster where the autotune package (with serve_app) is installed:",
        "#   serve deploy serve_config.yaml        # then: serve status",
        f"# The engine server listens on {args.host}:{args.port} on the replica's node; Serve's own HTTP proxy binds",
        "# 127.0.0.1. Expose either only behind a firewall or an authenticating proxy (SGLang has no authentication).",
    ]
    secret = [k for k, v in record.env.items() if _secret(k, v)]
    if secret:
        header.append(f"# Secret variables not stored here: {', '.join(secret)}. Set them in the replicas' environment "
                      "(the node's shell or a runtime_env); the engine server inherits them.")
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
    return "\n".join(header) + "\n" + body


def _secret(name: str, value: str) -> bool:
    return value == REDACTED or is_secret(name)
