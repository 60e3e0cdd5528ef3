"""serve_config.yaml validates against Ray Serve's own schema and carries the serve_app contract."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml
from ray.serve.schema import ServeDeploySchema

from autotune.export.command import exported_server
from autotune.export.errors import ExportError
from autotune.export.serve_config import (
    IMPORT_PATH,
    render_serve_config,
    serve_app_args,
    serve_config,
    validate_serve_config,
)
from tests.export.conftest import MULTINODE_ARGV, with_argv


def _app(text: str) -> dict:
    doc = yaml.safe_load(text)
    ServeDeploySchema.model_validate(doc)
    (app,) = doc["applications"]
    return app


def _sim(rec):
    """The record as a simulated trial ran it: the simulator module, its options, a benchmark-only variable."""
    argv = list(rec.argv)
    argv[:3] = ["/venv/bin/python3", "-m", "autotune.sim.server", "--sim-profile", "p", "--sim-time-scale", "5.0"]
    return replace(with_argv(rec, argv), env={**rec.env, "SGLANG_SIMULATE_ACC_LEN": "3.0"})


def test_validates_against_serve_schema_and_keeps_contract(record_factory, real_engine):
    rec = replace(
        record_factory(0, tputs={1: 60}, env={"NCCL_PROTO": "LL128", "NCCL_NVLS_ENABLE": "0"}), engine=real_engine
    )
    text = render_serve_config(rec, study_name="my study!")
    doc = yaml.safe_load(text)
    model = ServeDeploySchema.model_validate(doc)
    assert model.http_options.host == "127.0.0.1"
    app = model.applications[0]
    assert app.import_path == "serve_app.app:build_app"
    assert app.name == "my-study-best" and app.route_prefix == "/my-study-best"
    (dep,) = app.deployments
    assert dep.name == "EngineServer" and dep.num_replicas == 1
    assert dep.ray_actor_options is not None
    assert dep.ray_actor_options.num_gpus == 8 and dep.ray_actor_options.num_cpus == 1  # --tp-size 8
    args = app.args
    # No interpreter path and no trial port: the replica runs "-m sglang.launch_server" on its own Python, on a
    # free port of its node.
    assert args["argv"] == [
        "-m",
        "sglang.launch_server",
        "--model-path",
        "/models/kimi-k2.5",
        "--tp-size",
        "8",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    assert args["env"] == {"NCCL_PROTO": "LL128", "NCCL_NVLS_ENABLE": "0"}
    assert args["engine"] == "sglang" and args["gpus"] == 8
    assert (args["host"], args["port"]) == ("127.0.0.1", 0)
    assert args["unset_env"] == ["OMP_NUM_THREADS"] and args["ready_timeout_s"] >= 900
    assert args["wait_ready_in_constructor"] is True and args["health_follows_engine"] is True
    assert set(args) == {
        "name",
        "engine",
        "argv",
        "env",
        "unset_env",
        "host",
        "port",
        "gpus",
        "nnodes",
        "ready_timeout_s",
        "wait_ready_in_constructor",
        "health_follows_engine",
    }
    assert "# Engine: SGLang 0.5.17 on 2 x NVIDIA H200" in text
    assert "serve deploy serve_config.yaml" in text


def test_unset_env_comes_from_the_record_and_the_shim_path_builds_the_app(record_factory, real_engine):
    """The variables the trial's launch removed reach the exported args, and the exported import path resolves to the
    deployment's builder, which accepts the args."""
    import importlib

    rec = replace(record_factory(0, tputs={1: 60}), engine=real_engine, unset_env=["OMP_NUM_THREADS", "MKL_X"])
    args = _app(render_serve_config(rec, study_name="s"))["args"]
    assert args["unset_env"] == ["OMP_NUM_THREADS", "MKL_X"]
    module, _, attr = IMPORT_PATH.partition(":")
    from autotune.serve.app import EngineArgs, build_app

    assert getattr(importlib.import_module(module), attr) is build_app
    EngineArgs.model_validate(args)  # the deployment accepts what the export writes


def test_simulated_study_exports_sglang_and_a_rehearsal(record_factory):
    rec = _sim(record_factory(0, tputs={1: 60}))
    text = render_serve_config(rec, study_name="demo")
    app = _app(text)
    assert app["args"]["engine"] == "sglang" and app["args"]["argv"][:2] == ["-m", "sglang.launch_server"]
    assert "SGLANG_SIMULATE_ACC_LEN" not in app["args"]["env"] and "TUNED ON THE SIMULATOR" in text
    assert "SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement" in text
    rehearsal = render_serve_config(rec, study_name="demo", rehearsal=True)
    app = _app(rehearsal)
    assert app["args"]["engine"] == "sim" and app["args"]["argv"][:4] == [
        "-m",
        "autotune.sim.server",
        "--sim-profile",
        "p",
    ]
    assert app["args"]["env"]["SGLANG_SIMULATE_ACC_LEN"] == "3.0" and app["name"] == "demo-best-rehearsal"
    assert app["deployments"][0]["ray_actor_options"]["num_gpus"] == 0


def test_long_launch_raises_ready_timeout(record_factory):
    rec = record_factory(0, tputs={1: 60})
    rec = replace(rec, phases=replace(rec.phases, launch_to_ready_s=600.0))
    assert serve_app_args(rec, exported_server(rec).production, study_name="demo").ready_timeout_s == 1800.0


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d["applications"][0]["deployments"][0].update(bogus=1), "ignores keys.*bogus"),
        (lambda d: d["applications"][0].update(host="0.0.0.0"), "does not validate"),
        (lambda d: d["applications"][0].update(import_path="nodots"), "does not validate"),
    ],
)
def test_validator_rejects_what_serve_would_reject_or_drop(record_factory, mutate, match):
    rec = record_factory(0, tputs={1: 60})
    doc = serve_config(serve_app_args(rec, exported_server(rec).production, study_name="demo"))
    validate_serve_config(doc)
    mutate(doc)
    with pytest.raises(ExportError, match=match):
        validate_serve_config(doc)


def test_ray_serve_llm_config_carries_the_sglang_server_args(record_factory):
    from autotune.export.ray_llm import SERVER_CLS, engine_kwargs, ray_llm_config

    rec = record_factory(
        0, tputs={1: 60}, flags={"mem-fraction-static": 0.83, "enable-torch-compile": True}, env={"NCCL_ALGO": "Ring"}
    )
    cmd = exported_server(rec).production
    kwargs = engine_kwargs(cmd)
    assert kwargs == {
        "model_path": "/models/kimi-k2.5",
        "tp_size": 8,
        "mem_fraction_static": 0.83,
        "enable_torch_compile": True,
    }
    doc = ray_llm_config(cmd, study_name="demo")
    (app,) = doc["applications"]
    (llm,) = app["args"]["llm_configs"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app" and llm["server_cls"] == SERVER_CLS
    assert llm["model_loading_config"]["model_source"] == "/models/kimi-k2.5"
    assert llm["runtime_env"] == {"env_vars": {"NCCL_ALGO": "Ring"}}


def test_ray_serve_llm_model_id_is_the_name_the_measured_server_answers_to(record_factory):
    """Ray Serve LLM's OpenAI routes accept only ``model_id`` as a request's ``model``; it used to be
    ``<study>-best``, so a client of the measured server (``--served-model-name``, else SGLang's default, the model
    path) got "Could not find base model" from the Ray Serve LLM export."""
    from autotune.export.ray_llm import ray_llm_config

    named = record_factory(0, tputs={1: 60}, flags={"served-model-name": "kimi"})
    doc = ray_llm_config(exported_server(named).production, study_name="demo")
    (llm,) = doc["applications"][0]["args"]["llm_configs"]
    assert llm["model_loading_config"] == {"model_id": "kimi", "model_source": "/models/kimi-k2.5"}
    plain = record_factory(0, tputs={1: 60})
    doc = ray_llm_config(exported_server(plain).production, study_name="demo")
    (llm,) = doc["applications"][0]["args"]["llm_configs"]
    assert llm["model_loading_config"]["model_id"] == "/models/kimi-k2.5"


def test_multinode_server_reserves_a_node_share_per_bundle(record_factory, real_engine):
    """A TP-16 server over 2 nodes: the replica (node rank 0) takes 8 GPUs in a placement group of one 8-GPU bundle per
    node, and knows it spans 2 nodes, so it starts rank 1 on the other bundle; no node of 8 GPUs could hold 16."""
    from autotune.serve.app import EngineArgs, build_app

    rec = with_argv(replace(record_factory(0, tputs={1: 60}), engine=real_engine), MULTINODE_ARGV)
    app = _app(render_serve_config(rec, study_name="s"))
    args = app["args"]
    assert args["nnodes"] == 2 and args["gpus"] == 16
    assert "--node-rank" not in args["argv"] and "--dist-init-addr" not in args["argv"]  # the replica sets them
    assert args["argv"][args["argv"].index("--nnodes") + 1] == "2"
    (dep,) = app["deployments"]
    assert dep["ray_actor_options"]["num_gpus"] == 8
    assert dep["placement_group_bundles"] == [{"CPU": 1, "GPU": 8}, {"CPU": 1, "GPU": 8}]
    assert dep["placement_group_strategy"] == "STRICT_SPREAD"
    assert EngineArgs.model_validate(args).nnodes == 2
    built = build_app(args)._bound_deployment  # `serve run serve_app.app:build_app` places it the same way
    assert built.ray_actor_options["num_gpus"] == 8
    assert built._replica_config.placement_group_bundles == dep["placement_group_bundles"]


def test_single_node_server_has_no_placement_group(record_factory, real_engine):
    app = _app(render_serve_config(replace(record_factory(0, tputs={1: 60}), engine=real_engine), study_name="s"))
    (dep,) = app["deployments"]
    assert "placement_group_bundles" not in dep and dep["ray_actor_options"]["num_gpus"] == 8


def test_ray_serve_llm_config_of_a_multinode_server(record_factory, real_engine):
    """Ray Serve LLM's SGLangServer reserves one STRICT_PACK bundle of tp x pp GPUs unless placement_group_config says
    otherwise (ray 2.60, llm/_internal/serve/engines/sglang/sglang_engine.py), and SGLang's RayEngine picks rank 0's
    address itself: a TP-16 server over 2 nodes needs one 8-GPU bundle per node and no trial node rank or address."""
    from autotune.export.ray_llm import ray_llm_config

    rec = with_argv(replace(record_factory(0, tputs={1: 60}), engine=real_engine), MULTINODE_ARGV)
    (llm,) = ray_llm_config(exported_server(rec).production, study_name="s")["applications"][0]["args"]["llm_configs"]
    assert llm["engine_kwargs"] == {"model_path": "/models/k2", "tp_size": 16, "nnodes": 2}
    assert llm["placement_group_config"] == {
        "placement_group_bundles": [{"CPU": 1, "GPU": 8}, {"CPU": 1, "GPU": 8}],
        "placement_group_strategy": "STRICT_SPREAD",
    }


@pytest.mark.parametrize(
    "flags, bundles",
    [
        ({}, None),  # Ray's default bundle (tp x pp GPUs) is right
        ({"dp-size": 2}, [{"CPU": 1, "GPU": 16}]),  # data parallel: dp x tp GPUs, more than Ray's default
        ({"dp-size": 2, "enable-dp-attention": True}, None),  # DP attention runs inside the tp GPUs
    ],
)
def test_ray_serve_llm_placement_follows_the_server_gpus(record_factory, flags, bundles):
    from autotune.export.ray_llm import ray_llm_config

    rec = record_factory(0, tputs={1: 60}, flags=flags)
    (llm,) = ray_llm_config(exported_server(rec).production, study_name="s")["applications"][0]["args"]["llm_configs"]
    got = llm.get("placement_group_config")
    assert (got["placement_group_bundles"] if got else None) == bundles


def test_ray_serve_llm_config_stores_no_redacted_placeholder(record_factory):
    """A secret flag or variable is redacted in the record; ray_serve_llm.yaml used to carry the placeholder as the
    value (``api_key: <redacted>``, ``HF_TOKEN: <redacted>``), so deployed as written the server demanded the key
    "<redacted>" and downloaded with a token that is not one. Now they are left out and the header names them."""
    from autotune.core.secrets import REDACTED
    from autotune.export.ray_llm import ray_llm_config, render_ray_llm_config

    rec = record_factory(0, tputs={1: 60}, flags={"api-key": REDACTED}, env={"HF_TOKEN": REDACTED, "NCCL_ALGO": "Ring"})
    cmd = exported_server(rec).production
    (llm,) = ray_llm_config(cmd, study_name="s")["applications"][0]["args"]["llm_configs"]
    assert "api_key" not in llm["engine_kwargs"]
    assert llm["runtime_env"] == {"env_vars": {"NCCL_ALGO": "Ring"}}
    text = render_ray_llm_config(cmd, study_name="s", header=[])
    assert REDACTED not in text
    assert "engine_kwargs.api_key" in text and "HF_TOKEN" in text
