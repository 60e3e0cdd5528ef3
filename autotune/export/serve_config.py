"""``serve_config.yaml``: a Ray Serve config (``serve deploy``) running one trial's server through ``serve_app``.

The document is checked against Ray Serve's own schema (``ray.serve.schema.ServeDeploySchema``) before it is written,
including that Serve's model does not silently drop a key we wrote.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import yaml

from autotune.core.secrets import REDACTED, is_secret
from autotune.export.banner import engine_banner
from autotune.export.command import ExportedServer, ServerCommand, exported_server, option_argv
from autotune.export.errors import ExportError
from autotune.trial.records import TrialRecord

IMPORT_PATH = "serve_app.app:build_app"
DEPLOYMENT_NAME = "EngineServer"
DEFAULT_READY_TIMEOUT_S = 900.0
HEALTH_CHECK_PERIOD_S = 5


@dataclass(frozen=True)
class ServeAppArgs:
    """The ``args`` that ``serve_app.app:build_app`` takes."""

    name: str
    engine: str  # "sglang" | "sim"
    argv: list[str]  # "-m <module> <options>": the replica prepends its own interpreter
    env: dict[str, str]
    unset_env: list[str]
    host: str
    port: int
    gpus: int  # all the server's GPUs, over its nodes
    ready_timeout_s: float
    nnodes: int = 1  # nodes the server spans: the replica runs node rank 0 and starts a rank on each other bundle
    wait_ready_in_constructor: bool = True  # the replica is placed only once its engine answers /health
    health_follows_engine: bool = True  # an engine that is gone or failed makes the replica unhealthy (replaced)


def app_name(study_name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", study_name).strip("-") or "study"
    return f"{slug}-best"


def server_gpus(record: TrialRecord) -> int:
    """GPUs a production replica reserves: tensor parallel x data parallel of the trial's launch."""
    if record.launch is None:
        raise ExportError(f"trial {record.number} has no launch: nothing to deploy (was it written by a runner?)")
    return record.launch.gpus


def serve_app_args(
    record: TrialRecord, cmd: ServerCommand, *, study_name: str, rehearsal: bool = False
) -> ServeAppArgs:
    """The app's args for ``cmd``: argv without an interpreter (the replica runs ``-m <module>`` on its own Python) and
    ``--port 0`` (the replica picks a free port on its node and proxies to it)."""
    ready = record.phases.launch_to_ready_s
    kept = [(name, value) for name, value in cmd.options if value != REDACTED]  # a secret flag is not stored
    argv = ["-m", cmd.module, *option_argv(kept), "--host", cmd.host, "--port", "0"]
    return ServeAppArgs(
        name=app_name(study_name) + ("-rehearsal" if rehearsal else ""),
        engine="sim" if rehearsal else "sglang",
        argv=argv,
        env={k: v for k, v in (*cmd.env, *cmd.site_env) if not _secret(k, v)},
        unset_env=list(cmd.unset_env),
        host=cmd.host,
        port=0,
        gpus=0 if rehearsal else server_gpus(record),
        ready_timeout_s=max(DEFAULT_READY_TIMEOUT_S, 3.0 * ready) if ready else DEFAULT_READY_TIMEOUT_S,
        nnodes=cmd.nnodes,
    )


DEFAULT_HTTP_HOST = "127.0.0.1"  # Serve's HTTP proxy: loopback unless the study's export.http_host says otherwise
DEFAULT_HTTP_PORT = 8000


def serve_config(
    args: ServeAppArgs, *, http_port: int = DEFAULT_HTTP_PORT, http_host: str = DEFAULT_HTTP_HOST
) -> dict[str, Any]:
    """The Serve deploy document (plain data, as YAML will hold it). A multi-node server's replica reserves its own
    node's share of the GPUs, in a placement group of one bundle per node (as a study's slot,
    ``autotune.serve.app.slot_placement``); the other node ranks run on the other bundles."""
    deployment: dict[str, Any] = {
        "name": DEPLOYMENT_NAME,
        "num_replicas": 1,
        "ray_actor_options": {"num_gpus": per_node_gpus(args), "num_cpus": 1},
        # a dead engine is noticed after 3 failed checks (Serve's threshold): about 15 s
        "health_check_period_s": HEALTH_CHECK_PERIOD_S,
        "health_check_timeout_s": 30,
    }
    if args.nnodes > 1:
        deployment["placement_group_bundles"] = [{"CPU": 1, "GPU": per_node_gpus(args)} for _ in range(args.nnodes)]
        deployment["placement_group_strategy"] = "STRICT_SPREAD"
    return {
        "http_options": {"host": http_host, "port": http_port},
        "applications": [
            {
                "name": args.name,
                "route_prefix": f"/{args.name}",
                "import_path": IMPORT_PATH,
                "args": asdict(args),
                "deployments": [deployment],
            }
        ],
    }


def per_node_gpus(args: ServeAppArgs) -> int:
    """GPUs on each node of the server (all of them on a single-node server)."""
    return args.gpus // max(1, args.nnodes)


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
    record: TrialRecord,
    *,
    study_name: str,
    server: ExportedServer | None = None,
    rehearsal: bool = False,
    http_port: int = DEFAULT_HTTP_PORT,
    http_host: str = DEFAULT_HTTP_HOST,
) -> str:
    """YAML text with a comment header (engine, trial, how to deploy); validated before it is returned.

    ``rehearsal``: the simulator exactly as measured (a simulated study's ``rehearse_sim_serve.yaml``)."""
    server = exported_server(record) if server is None else server
    cmd = server.rehearsal if rehearsal else server.production
    if cmd is None:
        raise ExportError(f"trial {record.number} did not run on the simulator: there is nothing to rehearse")
    args = serve_app_args(record, cmd, study_name=study_name, rehearsal=rehearsal)
    doc = serve_config(args, http_port=http_port, http_host=http_host)
    validate_serve_config(doc)
    header = [
        f"# autotune best configuration: study {' '.join(study_name.split())}, trial {record.number} "
        f"(id {record.trial_id})",
        f"# {engine_banner(record.engine, record.env)}",
    ]
    if rehearsal:
        header.append("# REHEARSAL: autotune's SIMULATED SGLang server as measured; serve_config.yaml is the real one.")
    elif server.rehearsal is not None:
        header.append("# TUNED ON THE SIMULATOR: this is the SGLang server the tuned configuration stands for.")
    header += [f"#   left out (benchmark-only, see report.md): {s.text}" for s in server.removed if not rehearsal]
    secret = [k for k, v in cmd.env if _secret(k, v)]
    secret_flags = [f"--{name}" for name in cmd.secret_flags]
    if secret_flags:
        header.append(
            f"# Secret flags not stored here: {', '.join(secret_flags)}. Add them with their values to "
            "applications[0].args.argv where you deploy it (autotune does not store secrets)."
        )
    if secret:
        header.append(
            f"# Secret variables not stored here: {', '.join(secret)}. Set them in the replicas' environment "
            "(the node's shell or a runtime_env); the engine server inherits them."
        )
    header += DEPLOY_HELP
    header.append(
        f"# The engine listens on {args.host}:<a free port> on the replica's node; Serve's HTTP proxy binds "
        f"{http_host}:{http_port} (the study's export.http_host / export.http_port)."
    )
    body = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
    return "\n".join(header) + "\n" + body


DEPLOY_HELP = [
    "# Deploy on a running Ray cluster whose nodes have the autotune package installed (see docs/results.md):",
    "#   serve deploy serve_config.yaml        # then: serve status",
]


def is_secret_var(name: str, value: str) -> bool:
    """A variable whose value is not exported (redacted in the record, or a secret by declaration or shape)."""
    return value == REDACTED or is_secret(name, value=value)


_secret = is_secret_var
