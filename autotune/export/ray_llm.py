"""``ray_serve_llm.yaml``: the best configuration for Ray Serve LLM's own SGLang server (``ray.serve.llm``), when the
installed Ray ships it. Pure text, validated with Ray's ``LLMConfig``.

It is an alternative, not what was measured: Ray Serve LLM runs SGLang in the replica's process through SGLang's Ray
backend (``sglang.srt.ray.engine.RayEngine``, an SGLang release with it and ``pip install "sglang[all,ray]"``), its
OpenAI routes in front, where autotune measured ``python -m sglang.launch_server`` as a process of its own. Variables
are set through ``runtime_env.env_vars``; a variable the measured server ran without (``OMP_NUM_THREADS``, which Ray
sets in every worker) cannot be removed there. A secret flag or variable (redacted in the record) is left out, and the
header names it. Ray marks its SGLang support as early development.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import yaml

from autotune.core.secrets import REDACTED
from autotune.core.trial import server_gpus
from autotune.export.command import ServerCommand
from autotune.export.errors import ExportError
from autotune.export.serve_config import app_name, is_secret_var

SERVER_CLS = "ray.llm._internal.serve.engines.sglang:SGLangServer"
SGLANG_SERVER_FILE = "llm/_internal/serve/engines/sglang/sglang_engine.py"
BUILDER = "ray.serve.llm:build_openai_app"
_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(\d+\.\d*|\.\d+|\d+)([eE]-?\d+)?$")


def ray_llm_available() -> bool:
    """Whether the installed Ray ships Ray Serve LLM's SGLang server (looked up on disk: importing ray.llm's packages
    pulls in torch/transformers probes and logs warnings)."""
    spec = importlib.util.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any((Path(loc) / SGLANG_SERVER_FILE).is_file() for loc in spec.submodule_search_locations)


def engine_kwargs(cmd: ServerCommand) -> dict[str, Any]:
    """SGLang ``ServerArgs`` keyword arguments from the command's flags (``--tp-size 8`` -> ``tp_size=8``), but a
    secret flag (its value is not stored)."""
    out: dict[str, Any] = {}
    for name, value in cmd.options:
        if value != REDACTED:
            out[name.replace("-", "_")] = True if value is None else _typed(value)
    return out


def _typed(value: str) -> Any:
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    return value


def placement_group_config(cmd: ServerCommand) -> dict[str, Any] | None:
    """The placement group the server needs where Ray Serve LLM's default is wrong, else None (the default).

    Ray's ``SGLangServer.get_deployment_options`` reserves one ``STRICT_PACK`` bundle of ``tp_size x pp_size`` GPUs
    unless told otherwise; SGLang's ``RayEngine`` starts a scheduler per GPU of ``dp x tp x pp`` (``tp x pp`` with DP
    attention) and one bundle per node of a multi-node server (``sglang/srt/ray/engine.py``)."""
    flags = {name: True if value is None else value for name, value in cmd.options}
    tp, pp = (int(flags.get(f"{k}-size") or 1) for k in ("tp", "pp"))
    gpus = server_gpus(tp, flags)
    nodes = max(1, cmd.nnodes)
    if nodes == 1 and gpus == tp * pp:
        return None
    return {
        "placement_group_bundles": [{"CPU": 1, "GPU": gpus // nodes} for _ in range(nodes)],
        "placement_group_strategy": "STRICT_PACK" if nodes == 1 else "STRICT_SPREAD",
    }


def ray_llm_config(cmd: ServerCommand, *, study_name: str) -> dict[str, Any]:
    """The Serve deploy document for ``ray.serve.llm:build_openai_app`` with one SGLang ``LLMConfig``."""
    kwargs = engine_kwargs(cmd)
    model = kwargs.get("model_path")
    if not isinstance(model, str):
        raise ExportError("the exported command has no --model-path: Ray Serve LLM needs the model's source")
    name = app_name(study_name) + "-llm"
    # the name clients send as "model": Ray Serve LLM's OpenAI routes accept only model_id, and the measured server
    # answers to its --served-model-name (SGLang's default: the model path), so a client works against either export
    served = kwargs.get("served_model_name")
    llm: dict[str, Any] = {
        "model_loading_config": {"model_id": served if isinstance(served, str) else model, "model_source": model},
        "server_cls": SERVER_CLS,
        "engine_kwargs": kwargs,
        "deployment_config": {"num_replicas": 1},
    }
    placement = placement_group_config(cmd)
    if placement is not None:
        llm["placement_group_config"] = placement
    env = {k: v for k, v in (*cmd.env, *cmd.site_env) if not is_secret_var(k, v)}
    if env:
        llm["runtime_env"] = {"env_vars": env}
    return {
        "http_options": {"host": "127.0.0.1", "port": 8000},
        "applications": [{"name": name, "route_prefix": "/", "import_path": BUILDER, "args": {"llm_configs": [llm]}}],
    }


def validate_ray_llm_config(doc: dict[str, Any]) -> bool:
    """Raise ExportError unless Ray's ``LLMConfig`` accepts every LLM config of ``doc``. Returns False (not checked)
    where ``ray.serve.llm`` cannot be imported: it needs SGLang or vLLM installed."""
    from pydantic import ValidationError

    if not any(importlib.util.find_spec(engine) is not None for engine in ("sglang", "vllm")):
        return False  # ray.serve.llm refuses to import (after logging torch/transformers warnings)
    try:
        from ray.serve.llm import LLMConfig
    except ImportError:
        return False
    for app in doc["applications"]:
        for llm in app["args"]["llm_configs"]:
            try:
                LLMConfig.model_validate(llm)
            except (ValidationError, ImportError, AttributeError) as exc:
                raise ExportError(f"the Ray Serve LLM config does not validate against LLMConfig: {exc}") from exc
    return True


def render_ray_llm_config(cmd: ServerCommand, *, study_name: str, header: list[str]) -> str:
    doc = ray_llm_config(cmd, study_name=study_name)
    checked = validate_ray_llm_config(doc)
    lines = [
        *header,
        "# Ray Serve LLM (ray.serve.llm) with its SGLang server: an ALTERNATIVE to serve_config.yaml, NOT what was",
        "# measured. SGLang runs inside the replica through SGLang's Ray backend (sglang.srt.ray.engine; needs an SGLang",
        '# release with it: pip install "sglang[all,ray]"), behind Ray Serve LLM\'s OpenAI routes; autotune measured',
        "# `python -m sglang.launch_server` as its own process. Variables come from runtime_env.env_vars; "
        + (
            f"{', '.join(cmd.unset_env)} (removed for the measured server) cannot be removed here. "
            if cmd.unset_env
            else ""
        ),
        "# Ray marks its SGLang support as early development. Measure it before relying on it.",
        "# Checked against Ray's LLMConfig."
        if checked
        else "# Not checked against Ray's LLMConfig here "
        "(ray.serve.llm imports only where SGLang or vLLM is installed).",
        "#   serve deploy ray_serve_llm.yaml      # then: curl 127.0.0.1:8000/v1/models",
    ]
    secret_flags = [name.replace("-", "_") for name in cmd.secret_flags]
    if secret_flags:
        lines.append(
            f"# Secret flags not stored here: add {', '.join(f'engine_kwargs.{k}' for k in secret_flags)} with "
            "their values where you deploy it (autotune does not store secrets)."
        )
    secret = [k for k, v in cmd.env if is_secret_var(k, v)]
    if secret:
        lines.append(
            f"# Secret variables not stored here: {', '.join(secret)}. Set them in the nodes' environment or add "
            "them to runtime_env.env_vars where you deploy it."
        )
    return "\n".join(lines) + "\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, width=1000)
