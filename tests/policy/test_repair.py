"""The repair of proposals (cap and KV memory for the top load), the KV model and the learned memory regions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autotune.core.failures import FailureKind
from autotune.engines import engine_model
from autotune.policy import fit
from autotune.policy.kvmodel import KvModel
from autotune.policy.prescreen import launched_config, study_sizes, top_level
from autotune.policy.repair import Repairer
from autotune.space import load_study

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_study(ROOT / "search_spaces" / "speculative.yaml")
EAGLE = {
    "speculative_algorithm": "EAGLE3",
    "speculative_draft_model_path": "/models/public-k2-eagle3",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "max_running_requests": None,
    "mem_fraction_static": 0.85,
}
OFF = {"speculative_algorithm": None, "max_running_requests": None, "mem_fraction_static": 0.85}


def _repairer(kv: KvModel | None = None) -> Repairer:
    return Repairer(SPEC, top_level(SPEC), study_sizes(SPEC), kv=kv)


def test_the_speculative_default_cap_is_lifted_to_the_top_load() -> None:
    fixed = _repairer().repair(EAGLE)
    assert fixed is not None and fixed.params == {**EAGLE, "max_running_requests": 128}
    assert "max_running_requests None -> 128" in fixed.reason
    assert _repairer().repair(OFF) is None  # uncapped and enough cache: nothing to repair


def test_memory_is_raised_until_the_cache_holds_the_top_load_and_never_lowered() -> None:
    r = _repairer()
    low = {**OFF, "mem_fraction_static": 0.75}
    fixed = r.repair(low)
    assert fixed is not None
    mem = fixed.params["mem_fraction_static"]
    assert 0.75 < mem <= 0.92
    need = r.kv_need({"mem-fraction-static": mem})
    assert need is not None and (r.kv.tokens(fixed.params) or 0) >= need
    assert (r.kv.tokens({**low, "mem_fraction_static": round(mem - 0.01, 2)}) or 0) < need  # the smallest such value
    assert r.repair({**OFF, "mem_fraction_static": 0.9}) is None


def test_the_kv_model_learns_the_error_of_the_prediction() -> None:
    sizes = study_sizes(SPEC)
    assert sizes is not None
    smaller = dataclasses.replace(sizes, gpu_mem_bytes=sizes.gpu_mem_bytes * 0.92)  # the real GPU has less memory
    truth, kv = KvModel(SPEC, smaller), KvModel(SPEC, sizes)
    point = {**OFF, "mem_fraction_static": 0.85}
    assert (kv.tokens(point) or 0) > 1.3 * (truth.tokens(point) or 0)
    kv.observe(point, truth.tokens(point))
    assert kv.tokens(point) == truth.tokens(point)
    other = {**OFF, "mem_fraction_static": 0.8}
    kv.observe(other, truth.tokens(other))  # two fractions: the error's slope too
    for m in (0.78, 0.9):
        p = {**EAGLE, "mem_fraction_static": m}  # with a drafter: other bytes per token, the same memory error
        assert abs((kv.tokens(p) or 0) - (truth.tokens(p) or 0)) <= 0.01 * (truth.tokens(p) or 1)
    kv.observe(point, None)  # a log without the line changes nothing
    assert len(kv.errors) == 2


def test_a_repairer_that_remembers_answers_as_a_fresh_one_after_the_kv_model_learns() -> None:
    sizes = study_sizes(SPEC)
    assert sizes is not None
    smaller = dataclasses.replace(sizes, gpu_mem_bytes=sizes.gpu_mem_bytes * 0.9)
    points = [{**p, "mem_fraction_static": m} for p in (EAGLE, OFF) for m in (0.75, 0.8, 0.85)]
    kv = KvModel(SPEC, sizes)
    warm = _repairer(kv)
    before = [warm.repair(p) for p in points]  # remembered: predictions, fits and the KV model's line
    for m in (0.8, 0.85):  # each launch changes the KV model's line; the repairer forgets its answers, then answers
        kv.observe({**OFF, "mem_fraction_static": m}, KvModel(SPEC, smaller).tokens({**OFF, "mem_fraction_static": m}))
        warm.forget()
        for p in points:
            warm.repair(p)
    fresh_kv = KvModel(SPEC, sizes)
    fresh_kv.errors = list(kv.errors)
    fresh = _repairer(fresh_kv)
    after = [warm.repair(p) for p in points]
    assert after == [fresh.repair(p) for p in points]
    assert after != before  # the cache the GPU really has moves the memory the repair picks


def test_a_seed_point_predicted_not_to_fit_is_launched_last() -> None:
    from autotune.space import StudyOverrides
    from autotune.study.optuna_study import open_study
    from autotune.study.searcher import OptunaStudySearcher

    # sizes from the simulator profile, no nvidia-smi
    spec = load_study(ROOT / "search_spaces" / "h200-tp1-speculative.yaml", overrides=StudyOverrides(engine="sim"))
    study = open_study(spec, None)
    from autotune.trial.records import TrialOutcome, TrialRecord

    def missing(number: int, tid: str, params: dict, reason: str) -> TrialRecord:
        return TrialRecord(
            study=spec.name,
            trial_id=tid,
            number=number,
            params=params,
            flags={},
            env={},
            argv=[],
            outcome=TrialOutcome.FAILED,
            failure=FailureKind.UNKNOWN,
            message=reason,
        )

    s = OptunaStudySearcher(spec, study, budget=6, on_record=lambda r, log: None, make_missing_record=missing)
    oom = {"speculative_algorithm": None, "max_running_requests": None, "mem_fraction_static": 0.01}
    launched = []
    for i in range(6):
        cfg = s.suggest(f"t{i}")
        launched.append(cfg["params"])
        s.on_trial_complete(f"t{i}", None)  # no record: the trial is told as failed
    capped = dict(spec.points_to_evaluate[1])  # EAGLE-3 with SGLang's default cap; seed 3 is its lifted twin
    assert launched[:2] == [dict(spec.points_to_evaluate[i]) for i in (0, 2)]
    assert launched[-2:] == [capped, oom]  # launched last: the baseline first, then the predicted OOM
    assert oom not in launched[:-1] and capped not in launched[:-2]


def test_the_repair_stands_aside_while_every_launch_holding_the_top_load_breaks_the_constraints() -> None:
    from autotune.policy.base import Rules, Told
    from autotune.policy.repairing import FULL_LOAD_LAUNCHES, Repair
    from autotune.trial.records import TrialOutcome, TrialRecord

    def record(params: dict) -> TrialRecord:
        return TrialRecord(
            study=SPEC.name, trial_id="t", number=0, params=params, flags={}, env={}, argv=[],
            outcome=TrialOutcome.COMPLETE,
        )  # fmt: skip

    broke, met = {"tpot_ms.median": 20.0}, {"tpot_ms.median": -5.0}  # constraint values: <= 0 feasible
    full = {**EAGLE, "max_running_requests": 128}  # holds the top load at once: the repair leaves it
    capped = {**EAGLE, "max_running_requests": 32}
    rule = Repair(SPEC, study_sizes(SPEC))
    assert rule.repair(full) is None and rule.repair(capped) is not None
    for _ in range(FULL_LOAD_LAUNCHES - 1):
        rule.observe(full, record(full), Told(0, [1.0], broke))
        rule.observe(capped, record(capped), Told(0, [1.0], met))  # a point below the top load: not counted
    rule.observe(full, record(full), Told(0, [0.0], {}, FailureKind.OOM_AT_LAUNCH))  # a failed launch: not counted
    assert rule.repair(capped) is not None and Rules([rule]).notes() == []
    rule.observe(full, record(full), Told(0, [1.0], broke))
    assert rule.repair(capped) is None  # the cap is searched as proposed now
    assert Rules([rule]).notes() == [
        f"the repair stood aside: none of the {FULL_LOAD_LAUNCHES} launches that ran the top load (128) at once met "
        "the constraints, so caps and memory fractions were launched as proposed"
    ]
    rule.observe(full, record(full), Told(0, [1.0], met))  # one launch holding the top load meets them
    assert rule.repair(capped) is not None and Rules([rule]).notes() == []

    resumed = Repair(SPEC, study_sizes(SPEC))  # a resumed study restores the count from what Optuna holds
    for _ in range(FULL_LOAD_LAUNCHES):
        resumed.restore(full, Told(0, [1.0], broke))
    assert resumed.repair(capped) is None


def test_under_speculative_caps_tie_the_repair_reads_the_cap_the_point_launches_with() -> None:
    """With ``speculative_caps: tie`` a speculative point without a cap launches with the study's highest load as its
    running cap and CUDA-graph ceiling. The repair read SGLang's default 48 instead: it lifted the cap needlessly
    ("cap 48 < top load 128"), sized the cache for 48 requests, and judged fractions by graphs up to batch 48, so it
    raised a tree-drafting point to 0.92, where its graphs up to batch 128 do not fit."""
    tie = dataclasses.replace(SPEC, speculative_caps="tie")
    assert Repairer(tie, top_level(tie), study_sizes(tie)).repair(EAGLE) is None  # it runs 128 at once already
    no_cap = dataclasses.replace(
        tie,
        params=tuple(p for p in tie.params if p.name != "max_running_requests"),
        workload=dataclasses.replace(tie.workload, input_len=6000),
    )
    tree = {k: v for k, v in EAGLE.items() if k != "max_running_requests"}
    tree.update(speculative_eagle_topk=4, speculative_num_draft_tokens=8, mem_fraction_static=0.75)
    sizes = study_sizes(no_cap)
    assert sizes is not None
    fixed = Repairer(no_cap, top_level(no_cap), sizes).repair(tree)
    assert fixed is not None
    launched = launched_config(no_cap, fixed.params)
    assert launched.flags["max-running-requests"] == 128
    assert fit.predict(sizes, launched.flags, tp_size=launched.tp_size, model=engine_model("sim")).fits


def test_an_fp8_kv_cache_holds_twice_the_tokens_and_corrects_no_other_point() -> None:
    """``--kv-cache-dtype fp8_e4m3`` halves a token's cache bytes (SGLang's cell size is ``element_size`` of that
    dtype; the simulator does the same). The prediction ignored it: half the tokens an fp8 launch allocates, a memory
    fraction raised further than needed, and an fp8 launch's log read as a prediction error that the KV model then
    added to every point without it."""
    from autotune.space.types import ParamSpec

    dtype = ParamSpec("kv_cache_dtype", "categorical", flag="kv-cache-dtype", choices=("auto", "fp8_e4m3"))
    spec = dataclasses.replace(
        SPEC,
        params=(SPEC.param("mem_fraction_static"), dtype),
        points_to_evaluate=(),
        workload=dataclasses.replace(SPEC.workload, input_len=2048),
    )
    auto, fp8 = ({"mem_fraction_static": 0.75, "kv_cache_dtype": d} for d in ("auto", "fp8_e4m3"))
    kv = KvModel(spec, study_sizes(spec))
    assert abs((kv.tokens(fp8) or 0) - 2 * (kv.tokens(auto) or 0)) <= 1
    r = Repairer(spec, top_level(spec), study_sizes(spec))
    raised_auto, raised_fp8 = r.repair(auto), r.repair(fp8)
    assert raised_auto is not None and raised_fp8 is not None
    assert raised_fp8.params["mem_fraction_static"] < raised_auto.params["mem_fraction_static"]
    before = kv.tokens(auto)
    kv.observe(fp8, kv.tokens(fp8))  # an fp8 launch allocated what was predicted: nothing to correct
    assert kv.tokens(auto) == before


def test_a_stepped_integer_cap_is_lifted_to_a_value_on_its_grid() -> None:
    """An integer cap with ``step`` (16, 66, 116, ... 216) was lifted to the top load itself (64), a value outside
    its domain (Optuna warned "out of range" and TPE was told a value it cannot propose); the seed twin too."""
    from autotune.policy.prescreen import uncapped_seeds
    from autotune.space.types import ParamSpec
    from autotune.space.values import accepts

    smoke = load_study(ROOT / "search_spaces" / "smoke.yaml")
    cap = ParamSpec("max_running_requests", "int", flag="max-running-requests", low=16, high=216, step=50)
    seed = {"mem_fraction_static": 0.85, "max_running_requests": 16}
    spec = dataclasses.replace(
        smoke, params=(smoke.param("mem_fraction_static"), cap), points_to_evaluate=(seed,), baseline_point=None
    )
    assert top_level(spec) == 64
    fixed = Repairer(spec, 64, study_sizes(spec)).repair(seed)
    assert fixed is not None and fixed.params["max_running_requests"] == 66 and accepts(cap, 66)
    assert uncapped_seeds(spec) == [{**seed, "max_running_requests": 66}]
    high = dataclasses.replace(spec, params=(smoke.param("mem_fraction_static"), dataclasses.replace(cap, high=66)))
    assert Repairer(high, 67, study_sizes(high)).repair(seed) is None  # no value of the grid reaches 67


def test_a_max_total_tokens_flag_caps_the_cache_the_repair_and_the_kv_model_count() -> None:
    """SGLang allocates at most ``--max-total-tokens`` tokens whatever the memory. The prediction ignored the flag:
    the repair raised every point to the highest fraction for a cache the flag holds at 120,000 tokens, and a launch
    at the limit was read as a memory error, after which a fraction that allocates 51,585 tokens was predicted
    119,836."""
    server = SPEC.server.model_copy(update={"flags": {**SPEC.server.flags, "max-total-tokens": 120_000}})
    spec = dataclasses.replace(
        SPEC,
        server=server,
        params=(SPEC.param("mem_fraction_static"),),
        points_to_evaluate=(),
        workload=dataclasses.replace(SPEC.workload, input_len=2048),  # the top load needs more than the limit
    )
    kv = KvModel(spec, study_sizes(spec))
    low = {"mem_fraction_static": 0.75}
    allocated = kv.tokens(low)
    assert allocated is not None and allocated < 120_000
    fixed = Repairer(spec, top_level(spec), study_sizes(spec), kv=kv).repair(low)
    assert fixed is not None
    mem = fixed.params["mem_fraction_static"]
    assert kv.tokens(fixed.params) == 120_000 and kv.tokens({"mem_fraction_static": round(mem - 0.01, 2)}) < 120_000
    kv.observe({"mem_fraction_static": 0.9}, 120_000)  # a launch at the limit says nothing of the memory
    assert kv.tokens(low) == allocated
