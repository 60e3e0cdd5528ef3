"""Study files: the shipped ones, conditional sampling, every kind of invalid file, and trial configurations."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from autotune.core.errors import SpaceError
from autotune.engines import get_engine, sglang_rules
from autotune.space import StudyOverrides, StudySpec, load_study, suggest, to_trial_config
from autotune.space.enumerate import finite_points

SPACES = Path(__file__).resolve().parents[2] / "search_spaces"

BASE: dict[str, Any] = {
    "study": {"name": "t", "engine": "sim", "trials": 3},
    "sim": {"profile": "h200-llama-1b"},
    "params": {"mrr": {"flag": "max-running-requests", "type": "int", "low": 8, "high": 64}},
}


def write(tmp_path: Path, data: dict[str, Any] | str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def load(tmp_path: Path, data: dict[str, Any] | str, **overrides: Any) -> StudySpec:
    ov = StudyOverrides(**overrides) if overrides else None
    return load_study(write(tmp_path, data), overrides=ov)


def study(**sections: Any) -> dict[str, Any]:
    """BASE with whole sections replaced/added; ``study_`` keys merge into ``study``."""
    data = copy.deepcopy(BASE)
    for key, value in sections.items():
        if key.startswith("study_"):
            data["study"][key.removeprefix("study_")] = value
        else:
            data[key] = value
    return data


def error(tmp_path: Path, data: dict[str, Any] | str, **overrides: Any) -> str:
    with pytest.raises(SpaceError) as info:
        load(tmp_path, data, **overrides)
    message = str(info.value)
    assert "study.yaml" in message, message  # names the file
    assert "Fix:" in message, message  # says how to fix it
    return message


# --- the shipped studies --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["smoke", "speculative", "nccl"])
def test_shipped_studies_load(name: str) -> None:
    spec = load_study(SPACES / f"{name}.yaml")
    assert spec.name == name
    assert spec.engine == "sim" and spec.sim is not None and spec.sim.profile
    assert spec.server.host == "127.0.0.1"
    assert spec.server.env.get("NCCL_NVLS_ENABLE", "0") == "0"
    assert spec.points_to_evaluate
    for point in spec.points_to_evaluate:  # the first points are launchable
        cfg = to_trial_config(spec, point)
        assert sglang_rules.violations(cfg.flags, cfg.env, tp_size=cfg.tp_size) == []


def test_smoke_is_small_and_fast() -> None:
    spec = load_study(SPACES / "smoke.yaml")
    assert spec.sim is not None and spec.sim.profile == "h200-llama-1b" and spec.sim.time_scale >= 5
    assert spec.trials == 12 and spec.load_levels == (1, 16, 64)
    assert 2 <= len(spec.params) <= 4 and any(p.when for p in spec.params)
    assert spec.workload.output_len <= 128


def test_speculative_searches_the_users_questions() -> None:
    spec = load_study(SPACES / "speculative.yaml")
    assert spec.sim is not None and spec.sim.profile == "kimi-k2.5-int4-8x-rtxpro6000"
    assert spec.gpus_per_trial == 8 and spec.load_levels == (1, 8, 32, 128)
    assert spec.param("speculative_algorithm").choices == (None, "EAGLE3")
    drafters = {Path(str(c)).name for c in spec.param("speculative_draft_model_path").choices}
    assert drafters == {"public-k2-eagle3", "custom-k25-eagle3"}
    assert any(isinstance(c, int) and c > 48 for c in spec.param("max_running_requests").choices)
    assert spec.param("speculative_num_draft_tokens").when  # only for tree drafting


def test_nccl_space_is_valid_everywhere_at_tp8() -> None:
    spec = load_study(SPACES / "nccl.yaml")
    assert spec.server.tp_size == 8
    assert all(":" in c for c in spec.param("nccl_algo").choices if c is not None)  # per-collective form only
    for combo in itertools.product(*(p.choices for p in spec.params)):
        cfg = to_trial_config(spec, dict(zip([p.name for p in spec.params], combo, strict=True)))
        assert sglang_rules.violations(cfg.flags, cfg.env, tp_size=8) == [], combo


# --- defaults and conversion -----------------------------------------------------------------------------------------


def test_defaults(tmp_path: Path) -> None:
    data = study()
    del data["study"]["name"]
    spec = load(tmp_path, data)
    assert spec.name == "study"  # the file's stem
    assert spec.sampler == "tpe" and spec.seed == 0 and spec.max_concurrent is None
    assert [(o.metric, o.level, o.direction) for o in spec.objectives] == [("output_tok_per_s", "max", "maximize")]
    assert [(c.metric, c.level, c.max) for c in spec.constraints] == [
        ("ttft_ms.p99", "max", 2000),
        ("itl_ms.p99", "max", 100),
    ]
    assert spec.plan.concurrencies == (1, 8, 32) and spec.plan.workload == spec.workload
    assert spec.server.model_path == "h200-llama-1b" and spec.gpus_per_trial == 1
    assert spec.source == (tmp_path / "study.yaml").resolve()


def test_a_file_name_that_cannot_name_a_study_is_refused_where_study_name_is_unset(tmp_path: Path) -> None:
    """The default study name is the file's name: `my study é.yaml` without study.name passed validation, and the
    study then hung at its first trial (Ray Serve cannot encode the slot app's route `/my study é-slot-0`)."""
    data = study()
    del data["study"]["name"]
    path = write(tmp_path, data, "my study é.yaml")
    with pytest.raises(SpaceError, match=r"my study é.yaml: study.name: .*set study.name"):
        load_study(path)
    assert load_study(path, overrides=StudyOverrides(name="mine")).name == "mine"


def test_objective_and_constraint_levels(tmp_path: Path) -> None:
    spec = load(
        tmp_path,
        study(
            load_levels=[1, 4, 16],
            study_objectives=[{"metric": "output_tok_per_s", "level": 4}, {"metric": "e2e_ms.median", "level": "min"}],
            study_constraints=[
                {"metric": "itl_ms.p90", "max": 50},
                {"metric": "accept_length", "level": 16, "min": 1.5},
            ],
        ),
    )
    assert [o.direction for o in spec.objectives] == ["maximize", "minimize"]  # latencies minimized by default
    assert spec.constraints[0].level == 4  # defaults to the first objective's level
    assert spec.constraints[1].min == 1.5 and spec.constraints[1].max is None
    assert spec.resolve_level("max") == 16 and spec.resolve_level("min") == 1 and spec.resolve_level(4) == 4


def test_workload_properties_become_env_and_are_recorded(tmp_path: Path) -> None:
    spec = load(tmp_path, study(workload={"properties": {"SGLANG_SIMULATE_ACC_LEN": 3.0}}))
    assert spec.workload_properties == {"SGLANG_SIMULATE_ACC_LEN": "3.0"}
    assert to_trial_config(spec, {"mrr": 8}).env["SGLANG_SIMULATE_ACC_LEN"] == "3.0"


def test_jsonl_path_is_resolved_against_the_yaml_folder(tmp_path: Path) -> None:
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    spec = load(tmp_path, study(workload={"kind": "jsonl", "path": "prompts.jsonl"}))
    assert spec.workload.path == str((tmp_path / "prompts.jsonl").resolve())


def test_fixed_dp_size_counts_gpus(tmp_path: Path) -> None:
    spec = load(tmp_path, study(server={"tp_size": 2, "flags": {"dp-size": 2}}))
    assert spec.gpus_per_trial == 4


@pytest.mark.parametrize(
    "flags, gpus",
    [
        ({"pp-size": 2}, 4),  # pipeline stages each hold their own tp GPUs
        ({"dp-size": 2, "enable-dp-attention": True}, 2),  # DP attention splits the tp GPUs: no more of them
        ({"dp-size": 2, "enable-dp-attention": False}, 4),
        ({"dp-size": 2, "pp-size": 2}, 8),
    ],
)
def test_pipeline_parallel_and_dp_attention_count_gpus(tmp_path: Path, flags: dict[str, Any], gpus: int) -> None:
    """SGLang's GPUs: tp x pp x dp, dp only without DP attention (sglang srt/ray/engine.py, srt/layers/dp_attention.py);
    the trial's launch, its slot and the exported replica all reserve that many."""
    from autotune.trial.launched import Launched

    spec = load(tmp_path, study(server={"model_path": "m", "tp_size": 2, "flags": flags}))
    assert spec.gpus_per_trial == gpus
    launch = get_engine("sglang", python="py").launch_spec(to_trial_config(spec, {"mrr": 8}), port=1)
    assert launch.gpus == gpus and Launched.from_argv("sglang", launch.argv).gpus == gpus


@pytest.mark.parametrize(
    "name, short", [("data-parallel-size", "dp-size"), ("dp", "dp-size"), ("pipeline-parallel-size", "pp-size")]
)
def test_sglangs_other_names_of_the_parallel_sizes_are_refused(tmp_path: Path, name: str, short: str) -> None:
    """``--data-parallel-size 2`` is SGLang's ``--dp-size 2``: under that name the trial reserved tp_size GPUs for a
    server that runs on twice as many, and a searched ``data-parallel-size`` slipped past "GPUs per trial must be
    fixed". Both are refused, naming the flag autotune counts GPUs from."""
    message = error(tmp_path, study(server={"model_path": "m", "tp_size": 2, "flags": {name: 2}}))
    assert f"server.flags.{name}" in message and f"write `{short}`" in message
    param = {"flag": name, "type": "categorical", "choices": [1, 2]}
    message = error(tmp_path, study(params={**BASE["params"], "par": param}))
    assert "params.par.flag" in message and f"write `{short}`" in message


def test_nnodes_shares_the_pipeline_stages_gpus(tmp_path: Path) -> None:
    """TP 8 x PP 2 over 2 nodes: 16 GPUs, 8 on each node (not 8 over both)."""
    spec = load(tmp_path, study(server={"model_path": "m", "tp_size": 8, "nnodes": 2, "flags": {"pp-size": 2}}))
    assert spec.gpus_per_trial == 16


def test_overrides_replace_file_values(tmp_path: Path) -> None:
    spec = load(tmp_path, study(), name="other", trials=5, seed=7, sim_profile="p2", time_scale=3.0, tp_size=2)
    assert (spec.name, spec.trials, spec.seed, spec.server.tp_size) == ("other", 5, 7, 2)
    assert spec.sim is not None and (spec.sim.profile, spec.sim.time_scale) == ("p2", 3.0)
    real = load(tmp_path, study(), engine="sglang", model_path="/models/m")
    assert real.engine == "sglang" and real.sim is None and real.server.model_path == "/models/m"


def test_bad_override_is_named_as_coming_from_the_command_line(tmp_path: Path) -> None:
    msg = error(tmp_path, study(), trials=0)
    assert "study.trials (given on the command line)" in msg


def test_top_level_points_to_evaluate_are_accepted(tmp_path: Path) -> None:
    data = study(points_to_evaluate=[{"mrr": 16}])
    assert load(tmp_path, data).points_to_evaluate == ({"mrr": 16},)


def test_the_baseline_is_the_first_seed_point_or_the_explicit_one_and_is_enqueued_first(tmp_path: Path) -> None:
    from autotune.study.optuna_study import open_study

    assert load(tmp_path, study(study_points_to_evaluate=[{"mrr": 16}, {"mrr": 32}])).baseline == {"mrr": 16}
    assert load(tmp_path, BASE).baseline is None
    spec = load(tmp_path, study(study_points_to_evaluate=[{"mrr": 16}], study_baseline={"mrr": 48}))
    assert spec.baseline == {"mrr": 48}
    opened = open_study(spec, None)
    # the baseline first; the capped seed 16 is kept for last, its lifted twin (32, the top load) in its place
    assert [suggest(spec, opened.ask()) for _ in range(2)] == [{"mrr": 48}, {"mrr": 32}]
    message = error(tmp_path, study(study_baseline={"mrrr": 48}))
    assert "study.baseline.mrrr" in message and "unknown parameter" in message
    assert "study.baseline.mrr" in error(tmp_path, study(study_baseline={"mrr": 500}))


def test_the_export_http_host_and_port_are_settings(tmp_path: Path) -> None:
    assert load(tmp_path, BASE).export_http == ("127.0.0.1", 8000)
    spec = load(tmp_path, study(export={"http_host": "0.0.0.0", "http_port": 8123}))
    assert spec.export_http == ("0.0.0.0", 8123)
    assert "export.http_port" in error(tmp_path, study(export={"http_port": 0}))


# --- conditional, define-by-run sampling -----------------------------------------------------------------------------


def test_conditional_params_are_absent_when_their_condition_fails() -> None:
    spec = load_study(SPACES / "speculative.yaml")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen_off = seen_chain = seen_tree = False
    for _ in range(60):
        trial = opt.ask()
        values = suggest(spec, trial)
        assert set(values) == set(trial.params)  # only what was sampled
        if values["speculative_algorithm"] is None:
            seen_off = True
            assert not {"speculative_num_steps", "speculative_eagle_topk", "speculative_draft_model_path"} & set(values)
        else:
            assert {"speculative_num_steps", "speculative_eagle_topk", "speculative_draft_model_path"} <= set(values)
            tree = values["speculative_eagle_topk"] > 1
            seen_tree |= tree
            seen_chain |= not tree
            assert ("speculative_num_draft_tokens" in values) == tree
        opt.tell(trial, 1.0)
    assert seen_off and seen_chain and seen_tree


def test_suggest_uses_declared_distributions(tmp_path: Path) -> None:
    params = {
        "i": {"flag": "a", "type": "int", "low": 2, "high": 10, "step": 2},
        "f": {"flag": "b", "type": "float", "low": 0.01, "high": 1.0, "log": True},
        "c": {"env": "C", "type": "categorical", "choices": [None, "x"]},
        "b": {"flag": "d", "type": "bool"},
        "g": {"flag": "e", "type": "int", "low": 1, "high": 3, "when": {"i": {"ge": 4, "ne": 8}, "b": [True]}},
    }
    spec = load(tmp_path, study(params=params))
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(40):
        trial = opt.ask()
        v = suggest(spec, trial)
        assert (
            v["i"] in (2, 4, 6, 8, 10) and 0.01 <= v["f"] <= 1.0 and v["c"] in (None, "x") and v["b"] in (False, True)
        )
        assert ("g" in v) == (v["i"] >= 4 and v["i"] != 8 and v["b"] is True)
        dists = trial.distributions
        assert isinstance(dists["f"], optuna.distributions.FloatDistribution) and dists["f"].log
        assert dists["i"].step == 2
        opt.tell(trial, 0.0)


def test_floats_are_launched_at_the_precision_searched(tmp_path: Path) -> None:
    """A float param's draw is rounded (``round``, else the step's decimals, else 4 significant digits) before it
    becomes a flag: the value measured is the value recorded and exported."""
    params = {
        "r": {"flag": "mem-fraction-static", "type": "float", "low": 0.5, "high": 0.92, "round": 2},
        "s": {"flag": "b", "type": "float", "low": 0.1, "high": 0.9, "step": 0.05},
        "d": {"flag": "c", "type": "float", "low": 0.001, "high": 1.0, "log": True},
    }
    spec = load(tmp_path, study(params=params))
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(30):
        trial = opt.ask()
        v = suggest(spec, trial)
        assert v["r"] == round(v["r"], 2) and 0.5 <= v["r"] <= 0.92
        assert v["s"] == round(v["s"], 2) and abs(v["s"] / 0.05 - round(v["s"] / 0.05)) < 1e-9
        assert float(f"{v['d']:.4g}") == v["d"]
        cfg = to_trial_config(spec, v)
        assert cfg.flags["mem-fraction-static"] == v["r"] and cfg.params["r"] == v["r"]
        assert v["r"] != trial.params["r"] or trial.params["r"] == round(trial.params["r"], 2)
        opt.tell(trial, 0.0)
    assert "round" in error(
        tmp_path, study(params={"i": {"flag": "a", "type": "int", "low": 1, "high": 4, "round": 1}})
    )


def test_a_step_grid_off_the_steps_decimals_keeps_its_points(tmp_path: Path) -> None:
    """low 0.05, step 0.1: the grid is 0.05, 0.15, ..., 0.95. Rounded to the step's one decimal, 0.15 ran as 0.2 (off
    the grid, refused by to_trial_config) and 0.25 as 0.2 too; every draw is now a grid point, launched as drawn, and
    the listing has all ten."""
    params = {"s": {"flag": "schedule-conservativeness", "type": "float", "low": 0.05, "high": 0.95, "step": 0.1}}
    spec = load(tmp_path, study(params=params))
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(20):
        trial = opt.ask()
        v = suggest(spec, trial)
        assert v["s"] == pytest.approx(trial.params["s"]) and v["s"] == round(v["s"], 2)
        assert to_trial_config(spec, v).flags["schedule-conservativeness"] == v["s"]
        opt.tell(trial, 0.0)
    listed = finite_points(spec, 100)
    assert listed is not None and [p["s"] for p in listed] == [round(0.05 + 0.1 * k, 2) for k in range(10)]


def test_study_only_settings_must_name_what_the_study_sets(tmp_path: Path) -> None:
    data = study(
        server={
            "model_path": "/m",
            "flags": {"attention-backend": "triton"},
            "study_only": {"attention-backend": "the kit lacks fa3"},
        }
    )
    assert load(tmp_path, data).server.study_only == {"attention-backend": "the kit lacks fa3"}
    data["server"]["study_only"] = {"sampling-backend": "x"}
    assert "server.study_only.sampling-backend" in error(tmp_path, data)


# --- trial configurations --------------------------------------------------------------------------------------------


def test_to_trial_config_merges_fixed_and_sampled(tmp_path: Path) -> None:
    data = study(
        server={"model_path": "/m", "tp_size": 2, "flags": {"load-format": "dummy"}, "env": {"NCCL_NVLS_ENABLE": "0"}},
        workload={"properties": {"SGLANG_SIMULATE_ACC_LEN": "3.0"}},
        params={
            "algo": {"flag": "speculative-algorithm", "type": "categorical", "choices": [None, "EAGLE3"]},
            "drafter": {
                "flag": "speculative-draft-model-path",
                "type": "categorical",
                "choices": ["/d"],
                "when": {"algo": ["EAGLE3"]},
            },
            "steps": {
                "flag": "speculative-num-steps",
                "type": "int",
                "low": 1,
                "high": 5,
                "when": {"algo": ["EAGLE3"]},
            },
            "topk": {
                "flag": "speculative-eagle-topk",
                "type": "categorical",
                "choices": [1, 4],
                "when": {"algo": ["EAGLE3"]},
            },
            "no_car": {"flag": "disable-custom-all-reduce", "type": "bool"},
            "algo_env": {"env": "NCCL_ALGO", "type": "categorical", "choices": [None, "allreduce:tree"]},
            "channels": {"env": "NCCL_MIN_NCHANNELS", "type": "int", "low": 2, "high": 32},
            "flag_env": {"env": "SOME_SWITCH", "type": "bool"},
        },
    )
    spec = load(tmp_path, data)
    values = {
        "algo": "EAGLE3",
        "drafter": "/d",
        "steps": 3,
        "topk": 1,
        "no_car": True,
        "algo_env": None,
        "channels": 8,
        "flag_env": True,
    }
    cfg = to_trial_config(spec, values)
    assert cfg.model_path == "/m" and cfg.tp_size == 2 and cfg.host == "127.0.0.1"
    assert cfg.flags == {
        "load-format": "dummy",
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": "/d",
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
        "disable-custom-all-reduce": True,
    }
    # the engine applies what SGLang does silently: topk 1 -> draft tokens = steps + 1
    assert get_engine("sim").normalize(cfg).flags["speculative-num-draft-tokens"] == 4
    assert cfg.env == {
        "NCCL_NVLS_ENABLE": "0",
        "SGLANG_SIMULATE_ACC_LEN": "3.0",
        "NCCL_MIN_NCHANNELS": "8",
        "SOME_SWITCH": "1",
    }
    assert cfg.params == values

    off = to_trial_config(spec, {"algo": None, "steps": 3, "no_car": False, "flag_env": False, "channels": 2})
    assert off.flags == {"load-format": "dummy"}  # None/False omitted; steps ignored (its condition fails)
    assert "steps" not in off.params and "SOME_SWITCH" not in off.env


def test_to_trial_config_rejects_unknown_names_and_bad_values(tmp_path: Path) -> None:
    spec = load(tmp_path, study())
    with pytest.raises(SpaceError, match="did you mean `mrr`"):
        to_trial_config(spec, {"mr": 8})
    with pytest.raises(SpaceError, match="params.mrr"):
        to_trial_config(spec, {"mrr": 1000})


# --- invalid files: each names the file, the key and a fix -----------------------------------------------------------


def _p(**param: Any) -> Callable[[dict[str, Any]], None]:
    """A mutation that replaces param ``mrr``'s fields."""

    def apply(d: dict[str, Any]) -> None:
        d["params"]["mrr"] = param

    return apply


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = d
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value

    return apply


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    def apply(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = d
        for part in parents:
            node = node[part]
        del node[last]

    return apply


def _params(**params: Any) -> Callable[[dict[str, Any]], None]:
    return _set("params", params)


INT = {"type": "int", "low": 1, "high": 4}
CAT = {"type": "categorical", "choices": [None, "EAGLE3"]}

INVALID: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    # (id, mutation, key expected in the message, fix fragment)
    ("unknown top key", _set("studdy", {}), "studdy", "did you mean `study`"),
    ("unknown param key", _p(flag="x", type="int", lo=1, high=4), "params.mrr.lo", "did you mean `low`"),
    ("unknown nested key", _set("bench.round", 2), "bench.round", "did you mean `rounds`"),
    ("wrong type", _set("study.trials", "ten"), "study.trials", "whole number"),
    ("wrong type str", _set("load_levels", "1,8"), "load_levels", "YAML list"),
    ("wrong type bool", _set("workload.ignore_eos", "yes please"), "workload.ignore_eos", "true or false"),
    ("empty range", _p(flag="x", type="int", low=5, high=3), "params.mrr.low", "low < high"),
    ("equal range", _p(flag="x", type="float", low=0.5, high=0.5), "params.mrr.low", "low < high"),
    ("bad log range", _p(flag="x", type="float", low=0.0, high=1.0, log=True), "params.mrr.low", "above 0"),
    (
        "round coarser than the step grid",
        _p(flag="x", type="float", low=0.05, high=0.95, step=0.1, round=1),
        "params.mrr.round",
        "set round to 2 or more",
    ),
    ("log with step", _p(flag="x", type="float", low=0.1, high=1.0, log=True, step=0.1), "params.mrr.step", "remove"),
    ("off-grid high", _p(flag="x", type="int", low=1, high=10, step=4), "params.mrr.high", "set high to 9 or 13"),
    ("float bound for int", _p(flag="x", type="int", low=1.5, high=4), "params.mrr.low", "whole number"),
    ("missing high", _p(flag="x", type="int", low=1), "params.mrr.high", "add `high:`"),
    ("choices on int", _p(flag="x", type="int", low=1, high=4, choices=[1]), "params.mrr.choices", "categorical"),
    ("range on categorical", _p(flag="x", type="categorical", choices=[1], low=1), "params.mrr.low", "remove"),
    ("empty choices", _p(flag="x", type="categorical", choices=[]), "params.mrr.choices", "list choices"),
    ("duplicate choice", _p(flag="x", type="categorical", choices=[1, 2, 1]), "params.mrr.choices[2]", "once"),
    ("choices on bool", _p(flag="x", type="bool", choices=[True]), "params.mrr.choices", "remove"),
    ("unknown type", _p(flag="x", type="integer", low=1, high=2), "params.mrr.type", "'int'"),
    ("flag and env", _p(flag="x", env="X", **INT), "params.mrr", "exactly one"),
    ("neither flag nor env", _p(**INT), "params.mrr", "exactly one"),
    ("flag with dashes", _p(flag="--page-size", **INT), "params.mrr.flag", "`page-size`"),
    ("flag with underscores", _p(flag="page_size", **INT), "params.mrr.flag", "`page-size`"),
    ("bad env name", _p(env="1BAD", **INT), "params.mrr.env", "letters"),
    ("no params", _set("params", {}), "params", "add at least one"),
    (
        "when unknown param",
        _params(algorithm={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"algoritm": [1]}}),
        "params.b.when.algoritm",
        "did you mean `algorithm`",
    ),
    (
        "when later param",
        _params(b={"flag": "b", **INT, "when": {"a": ["EAGLE3"]}}, a={"flag": "a", **CAT}),
        "params.b.when.a",
        "move `a` above `b`",
    ),
    ("when self", _params(a={"flag": "a", **CAT, "when": {"a": ["EAGLE3"]}}), "params.a.when.a", "earlier"),
    (
        "when impossible value",
        _params(a={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"a": ["EAGLE"]}}),
        "params.b.when.a[0]",
        "one of its values",
    ),
    (
        "when bad operator",
        _params(a={"flag": "a", **INT}, b={"flag": "b", **INT, "when": {"a": {"gte": 2}}}),
        "params.b.when.a.gte",
        "did you mean `ge`",
    ),
    (
        "when order on strings",
        _params(a={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"a": {"gt": 1}}}),
        "params.b.when.a.gt",
        "list of allowed values",
    ),
    (
        "when scalar",
        _params(a={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"a": "EAGLE3"}}),
        "params.b.when.a",
        "['EAGLE3']",
    ),
    ("duplicate flag", _params(a={"flag": "x", **INT}, b={"flag": "x", **INT}), "params.b", "one parameter"),
    ("duplicate env", _params(a={"env": "X", **INT}, b={"env": "X", **INT}), "params.b", "one parameter"),
    ("flag fixed and searched", _set("server.flags", {"max-running-requests": 8}), "params.mrr.flag", "one of the two"),
    (
        "env fixed and searched",
        lambda d: (_set("server.env", {"NCCL_ALGO": "Ring"})(d), _params(a={"env": "NCCL_ALGO", **CAT})(d)),
        "params.a.env",
        "one of the two",
    ),
    ("searched dp-size", _p(flag="dp-size", **INT), "params.mrr.flag", "server.flags"),
    ("searched pp-size", _p(flag="pp-size", **INT), "params.mrr.flag", "server.flags"),
    ("unknown engine", _set("study.engine", "vllm"), "study.engine", "'sim' or 'sglang'"),
    ("sim without profile", _drop("sim"), "sim", "profile"),
    ("sim empty profile", _set("sim.profile", " "), "sim.profile", "name a profile"),
    ("sglang without model", _set("study.engine", "sglang"), "server.model_path", "set server.model_path"),
    ("zero trials", _set("study.trials", 0), "study.trials", "use a value greater than 0"),
    ("negative trials", _set("study.trials", -3), "study.trials", "greater than 0"),
    ("bad study name", _set("study.name", "a/b"), "study.name", "letters"),
    ("nsga2 one objective", _set("study.sampler", "nsga2"), "study.sampler", "several objectives"),
    (
        "unknown metric",
        _set("study.objectives", [{"metric": "output_tok_per_sec"}]),
        "study.objectives[0].metric",
        "did you mean `output_tok_per_s`",
    ),
    (
        "latency without stat",
        _set("study.constraints", [{"metric": "ttft_ms", "max": 1}]),
        "study.constraints[0].metric",
        "ttft_ms.p99",
    ),
    (
        "level not measured",
        _set("study.objectives", [{"metric": "request_per_s", "level": 64}]),
        "study.objectives[0].level",
        "load_levels",
    ),
    (
        "bad level word",
        _set("study.objectives", [{"metric": "request_per_s", "level": "top"}]),
        "study.objectives[0].level",
        '"max"',
    ),
    ("constraint without bound", _set("study.constraints", [{"metric": "itl_ms.p99"}]), "study.constraints[0]", "max:"),
    (
        "constraint min above max",
        _set("study.constraints", [{"metric": "itl_ms.p99", "min": 5, "max": 1}]),
        "study.constraints[0].min",
        "min <= max",
    ),
    ("no load levels", _set("load_levels", []), "load_levels", "e.g. [1, 8, 32]"),
    ("non-positive level", _set("load_levels", [1, 0]), "load_levels[1]", "1 or more"),
    ("duplicate level", _set("load_levels", [1, 8, 1]), "load_levels[2]", "once"),
    ("managed host flag", _set("server.flags", {"host": "0.0.0.0"}), "server.flags.host", "server.host"),
    ("managed port flag", _p(flag="port", **INT), "params.mrr.flag", "own free port"),
    ("managed nccl-port", _set("server.flags", {"nccl-port": 5000}), "server.flags.nccl-port", "NCCL port"),
    ("model-path flag", _set("server.flags", {"model-path": "/m"}), "server.flags.model-path", "server.model_path"),
    ("tp-size flag", _p(flag="tp-size", **INT), "params.mrr.flag", "server.tp_size"),
    (
        "nvls flag",
        _set("server.flags", {"enable-nccl-nvls": True}),
        "server.flags.enable-nccl-nvls",
        "NCCL_NVLS_ENABLE",
    ),
    ("symm-mem param", _p(flag="enable-symm-mem", type="bool"), "params.mrr.flag", "NCCL_NVLS_ENABLE"),
    ("nvls env", _set("server.env", {"NCCL_NVLS_ENABLE": "1"}), "server.env.NCCL_NVLS_ENABLE", 'set it to "0"'),
    (
        "nvls property",
        _set("workload.properties", {"NCCL_NVLS_ENABLE": 1}),
        "workload.properties.NCCL_NVLS_ENABLE",
        "NVLink multicast",
    ),
    ("nvls param", _p(env="NCCL_NVLS_ENABLE", type="categorical", choices=[None, "0", "1"]), "params.mrr.env", '"0"'),
    ("nvls bool param", _p(env="NCCL_NVLS_ENABLE", type="bool"), "params.mrr.env", '"0"'),
    ("env bool value", _set("server.env", {"X": True}), "server.env.X", "quote"),
    (
        "gpus in env",
        _set("server.env", {"CUDA_VISIBLE_DEVICES": "0,1"}),
        "server.env.CUDA_VISIBLE_DEVICES",
        "concurrent trials never share one",
    ),
    ("gpus param", _p(env="CUDA_VISIBLE_DEVICES", type="categorical", choices=["0", "1"]), "params.mrr.env", "Ray"),
    ("flag null value", _set("server.flags", {"page-size": None}), "server.flags.page-size", "remove the flag"),
    (
        "property also in env",
        lambda d: (_set("server.env", {"A": "1"})(d), _set("workload.properties", {"A": "2"})(d)),
        "workload.properties.A",
        "one of the two",
    ),
    ("jsonl without path", _set("workload.kind", "jsonl"), "workload.path", "set workload.path"),
    ("jsonl missing file", _set("workload", {"kind": "jsonl", "path": "nope.jsonl"}), "workload.path", "relative"),
    ("path for synthetic", _set("workload.path", "x.jsonl"), "workload.path", "kind: jsonl"),
    ("range ratio", _set("workload.range_ratio", 1.5), "workload.range_ratio", "less than or equal to 1"),
    (
        "point unknown param",
        _set("study.points_to_evaluate", [{"mr": 8}]),
        "study.points_to_evaluate[0].mr",
        "did you mean `mrr`",
    ),
    (
        "point out of range",
        _set("study.points_to_evaluate", [{"mrr": 100}]),
        "study.points_to_evaluate[0].mrr",
        "one of its values",
    ),
    (
        "point condition fails",
        lambda d: (
            _params(a={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"a": ["EAGLE3"]}})(d),
            _set("study.points_to_evaluate", [{"a": None, "b": 2}])(d),
        ),
        "study.points_to_evaluate[0].b",
        "remove `b`",
    ),
    (
        "point leaves its condition to the sampler",
        lambda d: (
            _params(a={"flag": "a", **CAT}, b={"flag": "b", **INT, "when": {"a": ["EAGLE3"]}})(d),
            _set("study.points_to_evaluate", [{"b": 2}])(d),
        ),
        "study.points_to_evaluate[0].b",
        "give `a` a value for which the condition holds",
    ),
    (
        "baseline leaves its condition to the sampler",
        lambda d: (
            _params(a={"flag": "a", **INT}, b={"flag": "b", **INT, "when": {"a": {"gt": 2}}})(d),
            _set("study.baseline", {"b": 2})(d),
        ),
        "study.baseline.b",
        "or remove `b` from this point",
    ),
    (
        "points twice",
        lambda d: (_set("study.points_to_evaluate", [{"mrr": 8}])(d), _set("points_to_evaluate", [{"mrr": 8}])(d)),
        "points_to_evaluate",
        "keep one list",
    ),
    ("study not a mapping", _set("study", ["x"]), "study", "`key: value`"),
]


@pytest.mark.parametrize(("mutate", "key", "fix"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_file(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], key: str, fix: str, site_multicast_off: object
) -> None:
    data = copy.deepcopy(BASE)
    mutate(data)
    msg = error(tmp_path, data)
    assert f"{key}:" in msg or f"{key} " in msg, msg
    assert fix in msg, msg


def test_a_point_may_leave_to_the_sampler_a_parameter_whose_every_value_passes_the_condition(tmp_path: Path) -> None:
    """A seed that names a conditional parameter and not the one its condition reads is refused (the sampler's draw
    may fail the condition and drop the seed's value: smoke's seed {cuda_graph_max_bs_decode: 64} at study seed 2 ran
    with max_running_requests 8 and no cuda-graph flag, and the verdict's baseline was another trial); where every
    value of that parameter passes, the seed is accepted and launched with its value."""
    data = study(
        params={
            "a": {"flag": "a", "type": "int", "low": 2, "high": 8},
            "c": {"flag": "c", "type": "categorical", "choices": ["x", "y"]},
            "b": {"flag": "b", "type": "int", "low": 1, "high": 4, "when": {"a": {"ge": 2}, "c": ["x", "y"]}},
        },
        study_points_to_evaluate=[{"b": 3}],
    )
    spec = load(tmp_path, data)
    assert spec.points_to_evaluate == ({"b": 3},)


def test_several_problems_are_reported_at_once(tmp_path: Path) -> None:
    data = study(load_levels=[], params={"mrr": {"flag": "port", "type": "int", "low": 5, "high": 1}})
    msg = error(tmp_path, data)
    assert "3 problems" in msg and "load_levels:" in msg and "params.mrr.flag:" in msg and "params.mrr.low:" in msg


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpaceError, match=r"nope\.yaml: study file not found\. Fix: check the path"):
        load_study(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("study:\n  name: [unclosed\n", "bad YAML at line"),
        ("study:\n  name: a\n   trials: 3\n", "bad YAML at line 3"),
        ("", "the file is empty"),
        ("- a\n- b\n", "not a mapping"),
    ],
)
def test_unreadable_yaml(tmp_path: Path, text: str, fragment: str) -> None:
    assert fragment in error(tmp_path, text)


def test_duplicate_keys_are_refused_with_their_lines(tmp_path: Path) -> None:
    text = "sim: {profile: p}\nparams:\n  a: {flag: x, type: bool}\n  b: {flag: y, type: bool}\n  a: {flag: z, type: bool}\n"
    msg = error(tmp_path, text)
    assert "duplicate key 'a' (first given on line 3)" in msg and "line 5" in msg


def test_windows_finalists_and_stopping_rule(tmp_path: Path) -> None:
    spec = load(tmp_path, study())
    plan = spec.plan
    assert (plan.min_windows, plan.max_windows, plan.target_rel_ci, plan.max_level_wall_s) == (2, 5, 0.05, None)
    assert plan.precision_metric == "output_tok_per_s" and plan.flush_cache
    assert (spec.finalists.count, spec.finalists.rounds, spec.stop_when, spec.cpu_isolation) == (3, 2, None, "auto")
    spec = load(
        tmp_path,
        study(
            bench={"min_windows": 3, "max_windows": 8, "target_rel_ci": 0.02, "max_level_s": 90},
            study_objectives=[{"metric": "tpot_ms.median"}],
            study_finalists={"count": 0},
            study_stop_when={"no_improvement_launches": 4},
        ),
    )
    assert (spec.plan.min_windows, spec.plan.max_windows, spec.plan.max_level_wall_s) == (3, 8, 90)
    assert spec.plan.precision_metric == "tpot_ms.median"  # the primary objective's metric
    assert spec.finalists.count == 0 and spec.stop_when is not None and spec.stop_when.no_improvement_launches == 4


@pytest.mark.parametrize(
    ("section", "needle"),
    [
        ({"bench": {"min_windows": 1}}, "bench.min_windows"),
        ({"bench": {"min_windows": 4, "max_windows": 3}}, "max_windows (3) is below min_windows (4)"),
        ({"bench": {"target_rel_ci": 0}}, "bench.target_rel_ci"),
        ({"bench": {"windows": 3}}, "unknown key `windows`"),
        ({"study_finalists": {"count": -1}}, "study.finalists.count"),
        ({"study_finalists": {"rounds": 0}}, "study.finalists.rounds"),
        ({"study_stop_when": {"no_improvement_launches": 0}}, "study.stop_when.no_improvement_launches"),
        ({"study_stop_when": {}}, "study.stop_when.no_improvement_launches: required key is missing"),
    ],
)
def test_bad_windows_finalists_and_stopping_rule(tmp_path: Path, section: dict[str, Any], needle: str) -> None:
    assert needle in error(tmp_path, study(**section))


def test_server_nnodes_splits_the_trials_gpus_and_reaches_the_launch(tmp_path: Path) -> None:
    from autotune.engines import get_engine
    from autotune.space import to_trial_config

    spec = load(tmp_path, study(server={"model_path": "m", "tp_size": 4, "nnodes": 2}))
    assert spec.server.nnodes == 2 and spec.gpus_per_trial == 4
    cfg = to_trial_config(spec, {"mrr": 16})
    launch = get_engine("sglang", python="py").launch_spec(cfg, port=1)
    assert launch.nnodes == 2 and launch.gpus == 4
    assert launch.argv[launch.argv.index("--nnodes") + 1] == "2"  # --node-rank and --dist-init-addr: per rank
    single = get_engine("sglang", python="py").launch_spec(to_trial_config(load(tmp_path, study()), {}), port=1)
    assert "--nnodes" not in single.argv and single.nnodes == 1
    assert "server.nnodes" in error(tmp_path, study(server={"model_path": "m", "tp_size": 3, "nnodes": 2}))
    assert "set server.nnodes instead" in error(tmp_path, study(server={"model_path": "m", "flags": {"node-rank": 1}}))


def test_a_seed_value_finer_than_the_search_is_refused(tmp_path: Path) -> None:
    """A float seed is launched at the precision searched: study.baseline 0.855 with ``round: 2`` ran as 0.85, so the
    baseline's trial was never found (its params hold 0.85). The file is refused, naming the value it would run as."""
    params = {
        "mem": {"flag": "mem-fraction-static", "type": "float", "low": 0.7, "high": 0.92, "round": 2},
        "x": {"flag": "schedule-conservativeness", "type": "float", "low": 0.1, "high": 2.0},
    }
    message = error(tmp_path, study(params=params, study_baseline={"mem": 0.855}))
    assert "study.baseline.mem" in message and "2 decimal places" in message and "0.85" in message
    message = error(tmp_path, study(params=params, study_points_to_evaluate=[{"x": 1.23456}]))
    assert "study.points_to_evaluate[0].x" in message and "4 significant digits" in message and "1.235" in message
    spec = load(tmp_path, study(params=params, study_baseline={"mem": 0.86, "x": 1}))
    opt = optuna.create_study()
    opt.enqueue_trial(spec.baseline)
    assert suggest(spec, opt.ask()) == spec.baseline  # launched as written


def test_a_choice_optuna_cannot_tell_from_a_bool_is_refused(tmp_path: Path) -> None:
    """choices [null, 1, true]: Optuna stores an enqueued ``true`` (a seed point, a point the searcher chose) as the
    choice 1, so a resumed study restored the switch's result as the value 1's. Quoting the number keeps them apart."""
    param = {"flag": "some-switch", "type": "categorical", "choices": [None, 1, True]}
    message = error(tmp_path, study(params={"s": param}))
    assert "params.s.choices[1]" in message and 'quote the number ("1")' in message
    assert "params.t.choices[0]" in error(tmp_path, study(params={"t": {**param, "choices": [0.0, False]}}))
    spec = load(tmp_path, study(params={"s": {**param, "choices": [None, "1", True]}}))
    opt = optuna.create_study()
    opt.enqueue_trial({"s": True})
    trial = opt.ask()
    assert suggest(spec, trial) == {"s": True} == trial.params


def test_seed_points_hold_floats_as_they_launch(tmp_path: Path) -> None:
    """A seed point may write a float parameter's value as an integer (``f: 1``); it launches as 1.0. Kept as 1, a
    seed launched last (a capped one, deferred) had another key than its trial, so a resumed study launched it again."""
    from autotune.space.values import params_key

    params = {
        "mrr": {"flag": "max-running-requests", "type": "int", "low": 8, "high": 64},
        "f": {"flag": "schedule-conservativeness", "type": "float", "low": 0.5, "high": 2.0, "round": 1},
    }
    spec = load(tmp_path, study(params=params, study_baseline={"mrr": 32, "f": 1}, study_points_to_evaluate=[{"f": 2}]))
    assert spec.baseline == {"mrr": 32, "f": 1.0} and spec.points_to_evaluate == ({"f": 2.0},)
    opt = optuna.create_study()
    for point in (spec.baseline, *spec.points_to_evaluate):
        opt.enqueue_trial(point)
        launched = suggest(spec, opt.ask())
        assert params_key({k: launched[k] for k in point}) == params_key(point)


def test_a_flag_given_several_values_says_one_value_is_passed(tmp_path: Path) -> None:
    """SGLang's several-value flags (``--cuda-graph-bs 1 2 4``) cannot be given: a flag's value is passed as one
    argument, so a list, or the string "1 2 4" a user would try next, would reach SGLang as one word. The list was
    refused with "give a value", which does not say why."""
    msg = error(tmp_path, study(server={"flags": {"cuda-graph-bs": [1, 2, 4]}}))
    assert "server.flags.cuda-graph-bs" in msg and "one value" in msg and "several" in msg
    assert len(msg.splitlines()) == 1


@pytest.mark.parametrize("host", ["::1", "[::1]", "fe80::1%eth0"])
def test_an_ipv6_server_host_is_refused_with_the_ipv4_to_use(tmp_path: Path, host: str) -> None:
    """Ports are picked and servers reached over IPv4 (``http://host:port``): ``::1`` passed validation and every
    trial then failed to deploy."""
    msg = error(tmp_path, study(server={"host": host}))
    assert "server.host" in msg and "IPv6" in msg and "127.0.0.1" in msg and len(msg.splitlines()) == 1


def test_sglangs_short_name_of_the_drafter_is_refused_naming_the_long_one(tmp_path: Path) -> None:
    """``--speculative-draft-model`` is SGLang 0.5.17's other name for ``--speculative-draft-model-path``, the flag
    autotune reads the drafter from: under the short name every EAGLE trial was set aside as "needs
    --speculative-draft-model-path", though the study gives one."""
    flags = {"speculative-algorithm": "EAGLE3", "speculative-draft-model": "/models/drafter"}
    message = error(tmp_path, study(server={"flags": flags}))
    assert "server.flags.speculative-draft-model" in message and "write `speculative-draft-model-path`" in message
    param = {"flag": "speculative-draft-model", "type": "categorical", "choices": ["/a", "/b"]}
    message = error(tmp_path, study(params={**BASE["params"], "drafter": param}))
    assert "params.drafter.flag" in message and "write `speculative-draft-model-path`" in message
