"""``python -m autotune.verify`` on a simulated study: starts the exported rehearsal script outside Ray, measures it with
the study's plan, judges each figure, writes verify.json / verify.md and tears the process group down."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autotune.bench.client import run_plan
from autotune.bench.plan_codec import plan_to_json
from autotune.bench.types import BenchPlan, WorkloadSpec
from autotune.core.trial import LaunchSpec
from autotune.export import export_study
from autotune.space import Objective
from autotune.trial.launched import Launched
from autotune.trial.launcher import launched
from autotune.trial.records import EngineInfo, TrialOutcome, TrialRecord
from autotune.trial.registry import group_alive
from autotune.verify import __main__ as verify
from autotune.verify.compare import compare
from tests.conftest import free_port

PLAN = BenchPlan(
    workload=WorkloadSpec(input_len=32, output_len=16, seed=3),
    concurrencies=(1, 4),
    rounds=2,
    min_requests=4,
    warmup_requests=1,
)
SIM_ARGV = [
    sys.executable,
    "-m",
    "autotune.sim.server",
    "--sim-profile",
    "h200-llama-1b",
    "--sim-time-scale",
    "10.0",
    "--model-path",
    "/models/llama-1b",
    "--tp-size",
    "1",
    "--load-format",
    "dummy",
    "--mem-fraction-static",
    "0.83",
]
ENGINE = EngineInfo(
    engine="sim",
    version="0",
    simulated=True,
    gpu_name="SIMULATED NVIDIA H200",
    gpu_count=1,
    profile="h200-llama-1b",
    time_scale=10.0,
)


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study of one trial, its figures measured on the simulated server it stands for, exported."""
    root = tmp_path_factory.mktemp("verify") / "vstudy"
    port = free_port()
    argv = (*SIM_ARGV, "--host", "127.0.0.1", "--port", str(port), "--nccl-port", str(free_port()))
    spec = LaunchSpec(engine="sim", argv=argv, env={}, host="127.0.0.1", port=port, gpus=0, ready_timeout_s=60)
    with launched(spec, root / "measure.log") as server:
        bench = run_plan(server.base_url, PLAN)
    record = TrialRecord(
        study="vstudy",
        trial_id="t0",
        number=0,
        params={"mem_fraction_static": 0.83},
        flags={},
        env={},
        argv=list(argv),
        launch=Launched.from_argv("sim", argv),
        outcome=TrialOutcome.COMPLETE,
        engine=ENGINE,
        bench=bench,
        objectives={"output_tok_per_s@max": bench.levels[-1].output_tok_per_s},
        feasible=True,
    )
    export_study(
        root,
        study_name="vstudy",
        objectives=[Objective("output_tok_per_s", "max", "maximize")],
        records=[record],
        load_levels=[1, 4],
    )
    study = {
        "name": "vstudy",
        "ready_timeout_s": 60.0,
        "plan": json.loads(plan_to_json(PLAN)),
        "objectives": [{"metric": "output_tok_per_s", "level": "max", "direction": "maximize"}],
        "server": {"study_only": {}},
    }
    (root / "study.json").write_text(json.dumps(study))
    return root


def _run(study_dir: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = verify.main([str(study_dir), "--out", str(out), *extra])
    report = json.loads((out / "verify.json").read_text()) if (out / "verify.json").exists() else {}
    return code, report


def test_verify_runs_the_rehearsal_measures_and_tears_down(study_dir: Path, tmp_path: Path) -> None:
    code, report = _run(study_dir, tmp_path / "v", "--tolerance", "0.5")
    assert report["kind"] == "rehearsal" and report["script"].endswith("best/rehearse_sim.sh")
    assert report["python"] == sys.executable and not report["server_alive_after_teardown"]
    assert [lv["concurrency"] for lv in report["autotune"]["levels"]] == [1, 4]
    judged = [f for f in report["figures"] if f["judged"]]
    assert {(f["concurrency"], f["metric"]) for f in judged} == {
        (1, "output_tok_per_s"),
        (4, "output_tok_per_s"),
        (1, "tpot_ms.median"),
        (4, "tpot_ms.median"),
    }
    # the study's record was measured in windows: each judged figure has its 95% interval
    assert all(f["verdict"] in ("within interval", "intervals overlap", "outside interval") for f in judged)
    assert all(f["low"] <= f["high"] and f["measured_low"] <= f["measured_high"] for f in judged)
    assert code == (0 if report["ok"] else 1) and report["ok"] == all(f["ok"] for f in judged)
    md = (tmp_path / "v" / "verify.md").read_text()
    assert "Rehearsal" in md and "| 4 | output_tok_per_s |" in md


def test_verify_fails_when_the_study_figures_are_not_reproduced(study_dir: Path, tmp_path: Path) -> None:
    best = study_dir / "best" / "best.json"
    doc = json.loads(best.read_text())
    broken = tmp_path / "broken"
    (broken / "best").mkdir(parents=True)
    for name in ("rehearse_sim.sh", "launch.sh"):
        (broken / "best" / name).write_bytes((study_dir / "best" / name).read_bytes())
        (broken / "best" / name).chmod(0o755)
    (broken / "study.json").write_text((study_dir / "study.json").read_text())
    for lv in doc["best"]["levels"]:
        lv["output_tok_per_s"] *= 10
        lv.pop("intervals", None)  # a record without intervals: judged against the tolerance
    (broken / "best" / "best.json").write_text(json.dumps(doc))
    code, report = _run(broken, tmp_path / "v")
    assert code == 1 and not report["ok"]
    assert {f["verdict"] for f in report["figures"] if f["metric"] == "output_tok_per_s"} == {"outside tolerance"}


def test_verify_refuses_what_the_site_forbids(study_dir: Path, tmp_path: Path, site_multicast_off: dict) -> None:
    doc = json.loads((study_dir / "best" / "best.json").read_text())
    doc["export"]["rehearsal"]["env"]["NCCL_NVLS_ENABLE"] = "1"
    bad = tmp_path / "bad"
    (bad / "best").mkdir(parents=True)
    (bad / "best" / "best.json").write_text(json.dumps(doc))
    (bad / "best" / "rehearse_sim.sh").write_text("#!/bin/sh\nexit 99\n")
    (bad / "study.json").write_text((study_dir / "study.json").read_text())
    code, report = _run(bad, tmp_path / "v")
    assert code == 2 and report == {} and not (tmp_path / "v" / "server.log").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "99999"], "--port must be a TCP port, 1-65535 (or 0: a free one), got 99999"),
        (["--ready-timeout", "-1"], "--ready-timeout must be a number of seconds above 0, got -1"),
        (["--tolerance", "-0.1"], "--tolerance must be a relative tolerance of 0 or more (0.10: 10%), got -0.1"),
        (["--host", "192.0.2.1"], "--host 192.0.2.1: no port can be opened there"),  # TEST-NET-1: never this machine's
        (
            ["--host", "::1"],
            "--host ::1 is an IPv6 address: autotune reaches its servers over IPv4 only; use 127.0.0.1",
        ),
        (["--metrics", "tok_per_s,tpot_ms.median"], "--metrics unknown metric(s) tok_per_s: use output_tok_per_s,"),
        (["--metrics", ","], "--metrics names no metric: use output_tok_per_s,"),  # used to judge nothing and PASS
    ],
)
def test_a_bad_value_is_an_error_before_the_server_starts(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    code, report = _run(study_dir, tmp_path / "v", *args)
    err = capsys.readouterr().err
    assert code == 2 and report == {} and err.startswith("error: ") and message in err, err
    assert not (tmp_path / "v").exists(), "nothing may be written for a bad command line"


def test_a_failed_start_shows_its_own_log_not_an_earlier_runs(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad"
    (bad / "best").mkdir(parents=True)
    (bad / "best" / "best.json").write_bytes((study_dir / "best" / "best.json").read_bytes())
    (bad / "best" / "rehearse_sim.sh").write_text("#!/bin/sh\necho 'this run: the server failed'\nexit 3\n")
    (bad / "best" / "rehearse_sim.sh").chmod(0o755)
    (bad / "study.json").write_text((study_dir / "study.json").read_text())
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "server.log").write_text("an earlier run: OverflowError\n")
    code, _ = _run(bad, tmp_path / "v")
    err = capsys.readouterr().err
    assert code == 2 and "this run: the server failed" in err and "an earlier run" not in err, err
    assert "an earlier run" not in (tmp_path / "v" / "server.log").read_text()


def test_figures_are_judged_against_the_interval_when_recorded() -> None:
    level = {
        "concurrency": 8,
        "output_tok_per_s": 100.0,
        "tpot_ms": {"median": 5.0},
        "ttft_ms": {"p99": 9.0},
        "intervals": {"output_tok_per_s": {"mean": 100.0, "sd": 2.0, "n": 3, "low": 95.0, "high": 105.0}},
    }
    inside = compare([level], [{**level, "output_tok_per_s": 104.0, "tpot_ms": {"median": 5.2}}])
    verdicts = {f.metric: f.verdict for f in inside}
    assert verdicts["output_tok_per_s"] == "within interval" and verdicts["tpot_ms.median"] == "within tolerance"
    outside = compare([level], [{**level, "output_tok_per_s": 106.0, "intervals": {}}])
    assert next(f for f in outside if f.metric == "output_tok_per_s").verdict == "outside interval"
    assert not all(f.ok for f in outside)
    again = {"output_tok_per_s": {"mean": 108.0, "sd": 2.0, "n": 3, "low": 104.0, "high": 112.0}}
    overlap = compare([level], [{**level, "output_tok_per_s": 108.0, "intervals": again}])
    overlapping = next(f for f in overlap if f.metric == "output_tok_per_s")
    assert overlapping.verdict == "intervals overlap" and not overlapping.ok  # shown, never a pass
    again["output_tok_per_s"]["low"] = 106.0
    apart = compare([level], [{**level, "output_tok_per_s": 108.0, "intervals": again}])
    assert next(f for f in apart if f.metric == "output_tok_per_s").verdict == "outside interval"
    missing = compare([level], [])
    assert {f.verdict for f in missing} == {"not measured"}
    # 12% of 100 beyond the interval's edge (105) is the machine-to-machine variation known so far: 116 may be another
    # machine, 118 is more than that
    near = compare([level], [{**level, "output_tok_per_s": 116.0, "intervals": {}}])
    assert next(f for f in near if f.metric == "output_tok_per_s").verdict == "outside interval"
    far = compare([level], [{**level, "output_tok_per_s": 118.0, "intervals": {}}])
    beyond = next(f for f in far if f.metric == "output_tok_per_s")
    assert beyond.verdict == "beyond machine variation" and not beyond.ok


def test_a_new_launch_is_judged_against_the_new_launch_interval_of_pooled_relaunches() -> None:
    """Four relaunches at 100, 104, 96, 100 (sd 3.27): the mean is known to +-5.2 (t(3) = 3.18), but one new launch
    is expected within +-11.6; 108 is a plausible new launch, outside the mean's interval, inside the new-launch one."""
    from autotune.verify.compare import across_launches

    pooled = across_launches([[{"concurrency": 8, "output_tok_per_s": v}] for v in (100.0, 104.0, 96.0, 100.0)])
    iv = pooled[0]["intervals"]["output_tok_per_s"]
    sd = (32 / 3) ** 0.5
    assert iv["high"] - 100.0 == pytest.approx(3.182446305284263 * sd / 2)
    assert iv["new_launch_high"] - 100.0 == pytest.approx(3.182446305284263 * sd * (1 + 1 / 4) ** 0.5)
    new = [{"concurrency": 8, "output_tok_per_s": 108.0}]
    as_new = next(f for f in compare(pooled, new, new_launch=True) if f.metric == "output_tok_per_s")
    as_mean = next(f for f in compare(pooled, new) if f.metric == "output_tok_per_s")
    assert as_new.verdict == "within interval" and as_mean.verdict == "outside interval"
    far = next(
        f
        for f in compare(pooled, [{"concurrency": 8, "output_tok_per_s": 113.0}], new_launch=True)
        if f.metric == "output_tok_per_s"
    )
    assert far.verdict == "outside interval"


def test_as_measured_adds_the_benchmark_only_settings_back(study_dir: Path) -> None:
    doc = json.loads((study_dir / "best" / "best.json").read_text())
    target = verify.choose_target(study_dir, doc, "launch", as_measured=True)
    assert target.extra_args == ("--load-format", "dummy") and target.as_measured
    plain = verify.choose_target(study_dir, doc, "launch", as_measured=False)
    assert plain.extra_args == () and plain.script.name == "launch.sh"
    assert plain.left_out == ("--load-format dummy",) and target.left_out == ()
    assert verify.choose_target(study_dir, doc, "rehearsal", as_measured=False).left_out == ()  # as measured
    spec = verify.launch_spec(target, "127.0.0.1", 1234, 10)
    assert spec.argv[-3:] == ("--", "--load-format", "dummy") and spec.env["PORT"] == "1234"


@pytest.fixture
def started(monkeypatch) -> list[int]:
    """The process ids of the servers verify starts."""
    pids: list[int] = []
    original = verify.ServerProcess.start

    def spy(self):  # type: ignore[no-untyped-def]
        original(self)
        pids.append(self.proc.pid)

    monkeypatch.setattr(verify.ServerProcess, "start", spy)
    return pids


def test_server_process_group_is_gone_after_verify(study_dir: Path, tmp_path: Path, started: list[int]) -> None:
    _run(study_dir, tmp_path / "v", "--tolerance", "10")
    assert started and not group_alive(started[0])


def test_the_server_verify_starts_keeps_the_site_variables(
    study_dir: Path, tmp_path: Path, monkeypatch, site_multicast_off: dict
) -> None:
    seen: dict[str, str] = {}
    original = verify.ServerProcess.wait_ready

    def spy(self, *a, **kw):  # type: ignore[no-untyped-def]
        ready = original(self, *a, **kw)
        raw = Path(f"/proc/{self.proc.pid}/environ").read_bytes().split(b"\0")
        seen.update(dict(item.decode().split("=", 1) for item in raw if b"=" in item))
        return ready

    monkeypatch.setattr(verify.ServerProcess, "wait_ready", spy)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    _run(study_dir, tmp_path / "v", "--tolerance", "10")
    assert {k: seen.get(k) for k in site_multicast_off} == site_multicast_off
    assert "OMP_NUM_THREADS" not in seen  # launch.sh's env -u: the measured server ran without it


def test_bench_serving_runs_the_study_workload_at_each_level(tmp_path: Path) -> None:
    from autotune.verify.sglang import bench_serving_argv, parse_result

    plan = BenchPlan(
        workload=WorkloadSpec(input_len=128, output_len=256, range_ratio=0.5, seed=7),
        concurrencies=(1, 64),
        rounds=2,
        min_requests=8,
    )
    argv = bench_serving_argv(plan, "http://127.0.0.1:9", "/models/m", 64, tmp_path / "o.jsonl")
    assert argv[argv.index("--num-prompts") + 1] == "128"  # default: one window's worth
    argv = bench_serving_argv(plan, "http://127.0.0.1:9", "/models/m", 64, tmp_path / "o.jsonl", 300)
    assert argv[argv.index("--num-prompts") + 1] == "300"
    opt = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    assert argv[1:3] == ["-m", "sglang.bench_serving"] and opt["--max-concurrency"] == "64"
    assert opt["--random-range-ratio"] == "0.5" and opt["--seed"] == "7"
    assert opt["--random-input-len"] == "128" and opt["--tokenizer"] == "/models/m"
    line = '{"output_throughput": 900.5, "p99_ttft_ms": 40.0, "median_tpot_ms": 3.1, "completed": 128, "duration": 9}'
    level = parse_result("{}\n" + line + "\n", 64, 128)
    assert (level.output_tok_per_s, level.ttft_ms_p99, level.tpot_ms_median, level.completed) == (900.5, 40.0, 3.1, 128)


def test_verify_judges_against_the_winners_relaunches_when_the_study_has_them() -> None:
    from autotune.verify.__main__ import study_basis

    own = [{"concurrency": 8, "output_tok_per_s": 150.0}]
    pooled = [
        {
            "concurrency": 8,
            "output_tok_per_s": 110.0,
            "intervals": {"output_tok_per_s": {"mean": 110.0, "sd": 10.0, "n": 3, "low": 85.2, "high": 134.8}},
        }
    ]
    doc = {
        "best": {"number": 3, "levels": own},
        "finalists": {"decision": {"winner": 3}, "winner_launches": 3, "winner_levels": pooled},
    }
    basis = study_basis(doc)
    assert basis.levels == pooled and "3 clean finalist relaunches of trial 3" in basis.text and basis.new_launch
    one = [{"concurrency": 8, "output_tok_per_s": 110.0, "intervals": {}}]  # one relaunch, no other finalist's spread
    for change in ({"winner_launches": 1, "winner_levels": one}, {"decision": {"winner": 4}}, {"winner_levels": []}):
        basis = study_basis({**doc, "finalists": {**doc["finalists"], **change}})
        assert basis.levels == own and "the trial's own launch" in basis.text and not basis.new_launch
    # one relaunch of the winner, but the other finalists' relaunches give the launch-to-launch spread
    lent = [
        {
            "concurrency": 8,
            "output_tok_per_s": 110.0,
            "intervals": {
                "output_tok_per_s": {
                    "mean": 110.0,
                    "sd": None,
                    "n": 1,
                    "low": None,
                    "high": None,
                    "new_launch_low": 90.0,
                    "new_launch_high": 130.0,
                    "new_launch_df": 2,
                    "new_launch_basis": "pooled",
                }
            },
        }
    ]
    basis = study_basis({**doc, "finalists": {**doc["finalists"], "winner_launches": 1, "winner_levels": lent}})
    assert basis.levels == lent and "1 clean finalist relaunch of trial 3" in basis.text and basis.new_launch
    assert study_basis({"best": {"number": 3, "levels": own}, "finalists": None}).levels == own


def test_bench_serving_sends_as_many_requests_as_the_study_measured() -> None:
    from autotune.verify.__main__ import prompts_per_level

    plan = BenchPlan(workload=WorkloadSpec(), concurrencies=(1, 16, 64), rounds=2, min_requests=8)
    doc = {
        "best": {
            "levels": [
                {"concurrency": 1, "requests": 33},
                {"concurrency": 16, "requests": 20},
                {"concurrency": 64, "requests": 410},
            ]
        }
    }
    assert prompts_per_level(doc, plan) == {1: 33, 16: 32, 64: 410}  # never below one window's worth


def test_bench_serving_figures_are_judged_too(study_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """bench_serving's figures count for the verdict, against the same interval as autotune's client."""
    doc = json.loads((study_dir / "best" / "best.json").read_text())
    far = [
        {
            "concurrency": lv["concurrency"],
            "num_prompts": 8,
            "completed": 8,
            "duration_s": 1.0,
            "output_tok_per_s": lv["output_tok_per_s"] * 5,
            "ttft_ms_p99": 1.0,
            "ttft_ms_median": 1.0,
            "tpot_ms_median": lv["tpot_ms"]["median"],
        }
        for lv in doc["best"]["levels"]
    ]

    def bench_serving(doc, plan, base_url, out_dir, on_level):  # type: ignore[no-untyped-def]
        for level in far:
            on_level(level)

    monkeypatch.setattr(verify, "_bench_serving", bench_serving)
    code, report = _run(study_dir, tmp_path / "v", "--bench-serving", "--metrics", "output_tok_per_s")
    bs = report["bench_serving"]["figures"]
    assert {(f["concurrency"], f["metric"]) for f in bs if f["judged"]} == {
        (1, "output_tok_per_s"),
        (4, "output_tok_per_s"),
    }
    # five times the study's throughput: outside the interval by far more than the known machine-to-machine variation
    assert all(f["verdict"] in ("outside interval", "beyond machine variation") for f in bs if f["judged"])
    assert any(f["verdict"] == "beyond machine variation" for f in bs if f["judged"])
    assert code == 1 and not report["ok"]
    md = (tmp_path / "v" / "verify.md").read_text()
    assert "Against the study's figures" in md
    # the two clients' offset on this launch: bench_serving sent 5x the study's throughput at the same TPOT
    offsets = {o["concurrency"]: o for o in report["bench_serving"]["vs_autotune_client"]}
    mine = {lv["concurrency"]: lv for lv in report["autotune"]["levels"]}
    for lv in far:
        o = offsets[lv["concurrency"]]
        assert o["output_tok_per_s"] == pytest.approx(
            lv["output_tok_per_s"] / mine[lv["concurrency"]]["output_tok_per_s"] - 1
        )
        assert o["tpot_ms.median"] == pytest.approx(
            lv["tpot_ms_median"] / mine[lv["concurrency"]]["tpot_ms"]["median"] - 1
        )
    assert "bench_serving against autotune's client on this same launch" in md


def test_narrow_interval_widths_keep_their_decimals() -> None:
    from autotune.verify.report import _pct

    assert [_pct(x) for x in (0.13, 1.64, 12.4)] == ["0.13%", "1.6%", "12%"]


def test_an_interrupted_verify_keeps_what_it_measured(
    study_dir: Path, tmp_path: Path, monkeypatch, started: list[int]
) -> None:
    """Stopped during bench_serving (a deadline's SIGINT): the server is stopped, exit 130, and verify.json keeps
    autotune's figures and the bench_serving levels that finished, marked complete: false."""

    def bench_serving(doc, plan, base_url, out_dir, on_level):
        on_level({"concurrency": 1, "num_prompts": 8, "completed": 8, "output_tok_per_s": 1.0})
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "_bench_serving", bench_serving)
    code, report = _run(study_dir, tmp_path / "v", "--bench-serving")
    assert code == 130 and report["complete"] is False and started and not group_alive(started[0])
    assert [lv["concurrency"] for lv in report["autotune"]["levels"]] == [1, 4]
    assert report["bench_serving"]["levels"][0]["concurrency"] == 1 and "teardown_s" not in report
    assert not (tmp_path / "v" / "verify.md").exists()


def test_open_loop_levels_are_pooled_and_compared_by_their_load_not_by_concurrency_0() -> None:
    """Two rate levels (concurrency 0 both, ``load`` rate8 / rate32): the finalist pooling used to merge them into
    one "concurrency 0" level (a mean of both rates), and verify compared both study levels with the last one."""
    from autotune.verify.compare import across_launches, compare

    def lv(c: int, load: str, tput: float) -> dict:
        return {"concurrency": c, "load": load, "output_tok_per_s": tput, "tpot_ms": {"median": 10.0}}

    launches = [[lv(8, "", 900.0), lv(0, "rate8", 100.0), lv(0, "rate32", 400.0)] for _ in range(3)]
    pooled = across_launches(launches)
    assert [(p["concurrency"], p.get("load", "")) for p in pooled] == [(8, ""), (0, "rate8"), (0, "rate32")]
    assert [p["output_tok_per_s"] for p in pooled] == [900.0, 100.0, 400.0]
    again = [lv(8, "", 900.0), lv(0, "rate8", 100.0), lv(0, "rate32", 400.0)]
    figures = [f for f in compare(pooled, again, tolerance=0.01) if f.metric == "output_tok_per_s"]
    assert [(f.concurrency, f.study, f.measured) for f in figures] == [
        (8, 900.0, 900.0),
        ("rate8", 100.0, 100.0),
        ("rate32", 400.0, 400.0),
    ]
    assert all(f.ok for f in figures)


def test_a_verify_run_with_an_open_loop_level_is_read_back_by_the_export(tmp_path: Path) -> None:
    """verify.json names an open-loop level by its load; the export reads it back for its between-machine section."""
    from autotune.export.machine_variation import coverage_lines, read_variation

    figures = [
        {"concurrency": c, "metric": "output_tok_per_s", "rel_diff": 0.05, "verdict": "within interval", "judged": True}
        for c in (8, "rate8")
    ]
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "verify.json").write_text(json.dumps({"complete": True, "trial": 1, "figures": figures}))
    variation = read_variation(tmp_path)
    assert variation is not None and [r[0] for r in variation.rows] == [8, "rate8"]
    assert "| rate8 | output_tok_per_s | +5.0% | within interval |" in coverage_lines(variation)


def test_a_production_run_without_the_benchmark_only_settings_says_so_and_is_not_machine_variation(
    tmp_path: Path,
) -> None:
    """launch.sh without --as-measured runs another command than the study measured: verify.md says which settings it
    left out, and the export does not report its differences as between-machine variation."""
    from autotune.export.machine_variation import read_variation
    from autotune.verify.report import render_markdown

    report = {
        "study": "s", "trial": 1, "engine_banner": "Engine: x", "script": "best/launch.sh", "kind": "launch",
        "as_measured": False, "extra_args": [], "extra_env": {}, "left_out": ["--load-format dummy"],
        "python": "python", "base_url": "http://127.0.0.1:1", "ok": True, "judged": ["output_tok_per_s"],
        "tolerance": 0.1, "complete": True,
        "figures": [
            {"concurrency": 8, "metric": "output_tok_per_s", "rel_diff": 0.3, "verdict": "outside interval",
             "judged": True}
        ],
    }  # fmt: skip
    md = render_markdown(report, [])
    assert "**Production command:**" in md and "left out (--load-format dummy)" in md
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "verify.json").write_text(json.dumps(report))
    assert read_variation(tmp_path) is None
    (tmp_path / "verify" / "verify.json").write_text(json.dumps({**report, "left_out": []}))
    assert read_variation(tmp_path) is not None


def test_a_study_that_optimized_goodput_is_judged_on_it(tmp_path: Path) -> None:
    """At a rate level output tok/s is the offered load's; a study whose objective is goodput@rate8 is judged on
    goodput by default (``--metrics goodput`` too), where its figures hold it."""

    def lv(goodput: float | None) -> dict:
        level: dict = {"concurrency": 0, "load": "rate8", "output_tok_per_s": 100.0, "tpot_ms": {"median": 5.0}}
        level["intervals"] = {
            "output_tok_per_s": {"low": 95.0, "high": 105.0, "n": 3},
            "tpot_ms.median": {"low": 4.5, "high": 5.5, "n": 3},
        }
        if goodput is not None:
            level["goodput"] = goodput
            level["intervals"]["goodput"] = {"low": 7.5, "high": 8.0, "n": 3}
        return level

    (tmp_path / "study.json").write_text(json.dumps({"objectives": [{"metric": "goodput", "level": "rate8"}]}))
    basis = verify.StudyBasis([lv(7.8)], "the trial", False)
    judged = verify.judged_metrics(tmp_path, None, basis)
    assert judged == ["output_tok_per_s", "tpot_ms.median", "goodput"]
    measured = {**lv(3.0), "intervals": {}}  # the same offered load, fewer requests within the SLOs
    figures = compare(basis.levels, [measured], judged=judged)
    (good,) = [f for f in figures if f.metric == "goodput"]
    assert good.concurrency == "rate8" and good.judged and not good.ok
    assert all(f.ok for f in figures if f.metric != "goodput")
    # figures of an older export (no goodput recorded): not judged, and no empty rows
    assert verify.judged_metrics(tmp_path, None, verify.StudyBasis([lv(None)], "", False))[-1] == "tpot_ms.median"
    assert not [f for f in compare([lv(None)], [measured]) if f.metric == "goodput"]
    assert verify.judged_metrics(tmp_path, "goodput", basis) == ["goodput"]


def test_a_rerun_stopped_midway_leaves_no_verify_md_of_the_run_before(
    study_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """verify.md and verify.json are of one run: a second run stopped after the server came up does not leave the
    first run's verdict beside its own complete: false verify.json."""
    code, _ = _run(study_dir, tmp_path / "v", "--tolerance", "10")
    assert code in (0, 1) and (tmp_path / "v" / "verify.md").exists()

    def stopped(url, plan):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(verify, "run_plan", stopped)
    code, report = _run(study_dir, tmp_path / "v")
    assert code == 130 and report["complete"] is False
    assert not (tmp_path / "v" / "verify.md").exists()


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("best/best.json", "{", "best.json is not readable JSON"),
        ("study.json", "[]", "study.json is not readable JSON"),
        ("study.json", '{"name": "vstudy"}', "study.json: no bench plan autotune can read (KeyError: 'plan')"),
    ],
)
def test_an_unreadable_study_file_is_an_error_naming_it(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, message: str
) -> None:
    """A truncated best.json, or a study.json of another tool or version, used to end in a traceback or an error that
    named no file."""
    copy = tmp_path / "copy"
    (copy / "best").mkdir(parents=True)
    for part in ("best/best.json", "best/rehearse_sim.sh", "study.json"):
        (copy / part).write_bytes((study_dir / part).read_bytes())
    (copy / name).write_text(text)
    code, report = _run(copy, tmp_path / "v")
    err = capsys.readouterr().err
    assert code == 2 and report == {} and err.startswith("error: ") and message in err and len(err.splitlines()) == 1
    assert str(copy / name) in err, err


def test_a_plan_of_a_newer_autotune_is_an_error_naming_the_field(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy"
    (copy / "best").mkdir(parents=True)
    for part in ("best/best.json", "best/rehearse_sim.sh"):
        (copy / part).write_bytes((study_dir / part).read_bytes())
    study = json.loads((study_dir / "study.json").read_text())
    study["plan"]["a_later_field"] = 1
    (copy / "study.json").write_text(json.dumps(study))
    code, _ = _run(copy, tmp_path / "v")
    err = capsys.readouterr().err
    assert code == 2 and "study.json: no bench plan autotune can read" in err and "a_later_field" in err, err


def test_a_server_not_ready_in_time_names_verifys_own_flag(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The launcher's hint (raise study.ready_timeout_s) changes nothing for verify, which reads study.json: the error
    names --ready-timeout."""
    slow = tmp_path / "slow"
    (slow / "best").mkdir(parents=True)
    (slow / "best" / "best.json").write_bytes((study_dir / "best" / "best.json").read_bytes())
    (slow / "best" / "rehearse_sim.sh").write_text("#!/bin/sh\necho 'loading weights'\nexec sleep 60\n")
    (slow / "study.json").write_text((study_dir / "study.json").read_text())
    code, _ = _run(slow, tmp_path / "v", "--ready-timeout", "1")
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert code == 2 and "within 1 s" in first and "--ready-timeout" in first, err
    assert "study.ready_timeout_s" not in err and "loading weights" in err


def test_a_metric_the_study_never_recorded_is_refused_before_the_server_starts(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], started: list[int]
) -> None:
    """--metrics goodput on a study without SLOs used to launch and measure, then FAIL every level as 'not measured'
    (exit 1: the export reads as not reproduced)."""
    code, report = _run(study_dir, tmp_path / "v", "--metrics", "goodput")
    err = capsys.readouterr().err
    assert code == 2 and report == {} and not started, err
    assert err.startswith("error: --metrics goodput: the study's figures do not hold it") and len(err.splitlines()) == 1


def test_a_port_another_server_listens_on_is_refused(
    study_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], started: list[int]
) -> None:
    """--port where a server already answers: the exported server failed to bind, and verify measured and judged the
    other server (PASS, exit 0)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        code, report = _run(study_dir, tmp_path / "v", "--port", str(port))
    err = capsys.readouterr().err
    assert code == 2 and report == {} and not started, err
    assert err.startswith(f"error: --port {port}: something already listens on 127.0.0.1:{port}"), err


def test_a_port_this_user_may_not_open_is_named_not_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """--port 80 as a user without root: the error blamed --host ("pass one of its addresses")."""
    import errno
    import socket

    class NoLowPorts(socket.socket):
        def bind(self, address: object) -> None:
            raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(verify.socket, "socket", NoLowPorts)
    with pytest.raises(verify.VerifyError, match=r"^--port 80: this user may not open it .*1024"):
        verify._open_port("127.0.0.1", 80)


def test_bench_serving_says_why_it_runs_nothing_for_a_study_of_rates_only(tmp_path: Path, monkeypatch) -> None:
    """A study whose levels are all open-loop (rates): bench_serving runs closed-loop levels only, so --bench-serving
    used to run nothing and print an empty table without a word."""
    from autotune.bench.load import Load

    monkeypatch.setattr(verify, "bench_serving_available", lambda: True)
    plan = BenchPlan(workload=WorkloadSpec(), concurrencies=(), loads=(Load.at_rate(8.0),))
    doc = {"export": {"production": {"args": ["--model-path", "/models/m"]}}, "best": {"levels": []}}
    skipped = verify._bench_serving(doc, plan, "http://127.0.0.1:9", tmp_path, on_level=lambda level: None)
    assert skipped is not None and "open-loop" in skipped
