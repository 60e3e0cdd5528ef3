"""One verdict per question, on constructed records: the recommendation, the regimes, speculation on vs off and the
verdict against the baseline rest on the same evidence and test, so a tie in one place is a tie in all; no regime
recommends a config that misses a study constraint."""

from __future__ import annotations

from dataclasses import replace

from autotune.export.analysis import analyze
from autotune.export.report import render_report
from autotune.finalists.choice import stage_finalists, study_outcome
from autotune.finalists.outcome import FinalistRun, StagePlan
from autotune.space import Objective
from tests.export.conftest import make_record, with_argv

LEVELS = (1, 8)
OBJECTIVES = [Objective("output_tok_per_s", "max", "maximize")]
KEY = "output_tok_per_s@max"
SPEC = {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "/models/d"}
BASE = {"mem-fraction-static": 0.85}


def _study(spec_at_8: list[float], plain_at_8: list[float], base_at_8: list[float], relaunch_window_pct=None):  # type: ignore[no-untyped-def]
    """0: the baseline (plain). 1: speculative. 2: plain. Each relaunched len(values) times (``relaunch_window_pct``:
    each relaunch's measurement-window interval, +-%)."""
    records = [
        make_record(0, tputs={1: 50, 8: base_at_8[0]}, flags=BASE, window_pct=2.0),
        make_record(1, tputs={1: 90, 8: spec_at_8[0]}, flags=SPEC, window_pct=2.0),
        make_record(2, tputs={1: 60, 8: plain_at_8[0]}, flags={"mem-fraction-static": 0.8}, window_pct=2.0),
    ]
    finalists = stage_finalists(records, KEY, "maximize", 2, BASE)
    assert finalists[-1] == 0 and len(finalists) == len(set(finalists))  # the leaders, then the baseline (once)
    runs = []
    per_trial = {0: (50, base_at_8), 1: (90, spec_at_8), 2: (60, plain_at_8)}
    for n, (low, values) in per_trial.items():
        for r, v in enumerate(values, start=1):
            rec = replace(
                make_record(
                    n, tputs={1: low * (1 + r / 100), 8: v}, flags=records[n].flags, window_pct=relaunch_window_pct
                ),
                trial_id=f"t{n:04d}-f1r{r}",
            )
            runs.append(FinalistRun(stage=1, round=r, repeats=n, repeats_trial_id=f"t{n:04d}", record=rec))
    rounds = len(spec_at_8)
    outcome = study_outcome(
        records,
        [StagePlan(1, finalists, rounds)],
        runs,
        objective=OBJECTIVES[0],
        alpha=0.05,
        count=2,
        baseline=BASE,
    )
    return analyze(
        study_name="demo", objectives=OBJECTIVES, records=records, load_levels=LEVELS, finalists=outcome, baseline=BASE
    )


def test_a_tie_in_the_finalist_stage_is_a_tie_in_the_regimes_and_in_speculation_on_vs_off() -> None:
    a = _study(spec_at_8=[1100, 1050, 1150], plain_at_8=[1090, 1120, 1040], base_at_8=[900, 905, 895])
    d = a.finalists.decision
    assert d is not None and d.method == "tie" and set(d.tied) == {1, 2}
    best = a.best.record
    assert best is not None and best.number == d.winner
    top = next(c for c in a.regimes if c.concurrency == 8)
    assert top.record is not None and top.record.number == best.number  # the recommendation leads at its level
    assert set(top.tied) == {1, 2} - {best.number}  # and the tie is stated there too
    comp = next(c for c in a.crossover.comparisons if c.concurrency == 8)
    assert comp.tie and comp.spec_wins is None and comp.verdict == "tie"
    assert "tie" in a.crossover.summary.lower()
    report = render_report(a)
    regime_row = next(line for line in report.splitlines() if line.startswith("| 8 |") and "within the noise" in line)
    assert f"#{best.number}" in regime_row
    # the baseline is beaten beyond the noise, with an interval that excludes zero
    v = a.verdict
    assert v is not None and v.kind == "beats" and v.baseline == 0 and v.recommended == best.number
    gain8 = next(g for g in v.gains if g.concurrency == 8)
    assert gain8.difference is not None and gain8.difference.separable and gain8.difference.low_pct > 0
    assert gain8.baseline_launches == 3 and gain8.recommended_launches == 3
    assert report.index("## Your configuration vs the recommendation") < report.index("## Recommendation")
    assert "relaunches on the measured machine" in report


def test_a_separable_winner_is_the_winner_everywhere() -> None:
    a = _study(spec_at_8=[1300, 1310, 1290], plain_at_8=[1000, 1005, 995], base_at_8=[990, 1000, 1010])
    d = a.finalists.decision
    assert d is not None and d.method == "separable" and d.winner == 1
    top = next(c for c in a.regimes if c.concurrency == 8)
    assert top.record is not None and top.record.number == 1 and top.tied == ()
    comp = next(c for c in a.crossover.comparisons if c.concurrency == 8)
    assert comp.spec_wins is True and not comp.tie


def test_no_config_beats_the_baseline_beyond_the_noise() -> None:
    a = _study(spec_at_8=[1010, 990, 1030], plain_at_8=[900, 905, 910], base_at_8=[1000, 1040, 980])
    v = a.verdict
    assert v is not None and v.kind in ("no_better", "is_best")
    assert "No config beats your current one" in v.headline and "beyond the noise" in v.headline


def test_no_regime_recommends_an_infeasible_config() -> None:
    fast_but_over_slo = make_record(
        0, tputs={1: 200, 8: 3000}, flags=SPEC, window_pct=2.0, constraints={"ttft_ms.p99@max": 50.0}
    )
    slower = make_record(1, tputs={1: 100, 8: 1000}, flags=BASE, window_pct=2.0)
    a = analyze(
        study_name="demo", objectives=OBJECTIVES, records=[fast_but_over_slo, slower], load_levels=LEVELS, baseline=SPEC
    )
    for choice in a.regimes:
        assert choice.record is not None and choice.record.number == 1
    # the baseline misses the constraints: the verdict says so and recommends the feasible config
    assert a.verdict is not None and a.verdict.baseline == 0 and a.verdict.recommended == 1
    assert "misses the study's constraints" in a.verdict.headline
    only_infeasible = analyze(study_name="demo", objectives=OBJECTIVES, records=[fast_but_over_slo], load_levels=LEVELS)
    assert all(c.record is None for c in only_infeasible.regimes)
    assert "none meets the study's constraints" in render_report(only_infeasible)


def test_the_report_says_what_its_intervals_cover_and_shows_a_verify_runs_variation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from autotune.export import export_study

    records = [
        make_record(0, tputs={1: 50, 8: 1000}, flags=BASE, window_pct=2.0),
        make_record(1, tputs={1: 60, 8: 1300}, flags={"mem-fraction-static": 0.8}, window_pct=2.0),
    ]
    kwargs = {
        "study_name": "demo",
        "objectives": OBJECTIVES,
        "records": records,
        "load_levels": LEVELS,
        "baseline": BASE,
    }
    first = export_study(tmp_path, **kwargs).report.read_text()
    assert "relaunches on the measured machine" in first and "no between-machine measurement yet" in first
    doc = json.loads((tmp_path / "best" / "best.json").read_text())
    assert doc["verdict"].startswith("Recommended: trial 1") and doc["baseline"]["baseline_trial"] == 0
    assert "relaunches on the measured machine" in doc["intervals_cover"]
    (tmp_path / "verify").mkdir()
    (tmp_path / "verify" / "verify.json").write_text(
        json.dumps(
            {
                "complete": True,
                "trial": 1,
                "engine_banner": "Engine: SGLang on node b",
                "figures": [
                    {
                        "concurrency": 8,
                        "metric": "output_tok_per_s",
                        "rel_diff": 0.11,
                        "verdict": "outside interval",
                        "judged": True,
                    }
                ],
            }
        )
    )
    again = export_study(tmp_path, **kwargs).report.read_text()
    assert (
        "Between-machine variation measured by a verify run" in again and "| 8 | output_tok_per_s | +11.0% |" in again
    )
    assert json.loads((tmp_path / "best" / "best.json").read_text())["between_machine_variation"]["rows"]


def test_a_simulated_launch_script_names_the_model_its_profile_stands_for() -> None:
    from autotune.export.launch_script import _simulated_model  # launch.sh's header line for a simulated study

    rec = make_record(0, tputs={1: 50, 8: 1000}, flags=BASE)
    assert _simulated_model(rec) == ["# Simulated model: moonshotai/Kimi-K2.5 (profile kimi-k2.5-int4-8x-rtxpro6000)."]
    dummy = with_argv(rec, [a if a != "/models/kimi-k2.5" else "dummy-model" for a in rec.argv])
    assert "the command names --model-path dummy-model: point it at that model's weights" in _simulated_model(dummy)[0]
    llama = replace(
        with_argv(rec, [a if a != "/models/kimi-k2.5" else "meta-llama/Llama-3.2-1B" for a in rec.argv]),
        engine=replace(rec.engine, profile="h200-llama-1b"),
    )
    assert _simulated_model(llama) == ["# Simulated model: meta-llama/Llama-3.2-1B (profile h200-llama-1b)."]


def test_a_baseline_naming_some_parameters_is_found_among_the_trials() -> None:
    """A seed point may name a subset of the parameters (the rest is sampled) and an integer for a float: the trial
    that measured it is still the baseline, relaunched in the finalist stage and judged against (it used to be
    matched on all its params exactly, so such a study was told it "names no baseline")."""
    point = {"mem_fraction_static": 1, "max_running_requests": 32}  # nccl_algo is sampled; 1 stands for 1.0
    records = [
        make_record(0, tputs={1: 50, 8: 800}, params={**point, "mem_fraction_static": 1.0, "nccl_algo": "Ring"}),
        make_record(1, tputs={1: 60, 8: 1000}, params={"mem_fraction_static": 0.8, "max_running_requests": 64}),
    ]
    assert stage_finalists(records, KEY, "maximize", 1, point) == (1, 0)
    a = analyze(study_name="demo", objectives=OBJECTIVES, records=records, load_levels=LEVELS, baseline=point)
    assert a.verdict is not None and a.verdict.kind != "no_baseline" and a.verdict.baseline == 0


def test_a_named_baseline_without_a_finished_trial_is_not_called_missing_from_the_study() -> None:
    """A study interrupted before its baseline trial finished (other trials running beside it did): the verdict said
    the study "names no baseline (no study.baseline, no points_to_evaluate)", which it does."""
    records = [make_record(1, tputs={1: 60, 8: 1000}, params={"mem_fraction_static": 0.8})]
    a = analyze(
        study_name="demo",
        objectives=OBJECTIVES,
        records=records,
        load_levels=LEVELS,
        baseline={"mem_fraction_static": 0.9},
    )
    assert a.verdict is not None and a.verdict.kind == "no_baseline"
    assert "names no baseline" not in a.verdict.headline and "no finished trial" in a.verdict.headline
    plain = analyze(study_name="demo", objectives=OBJECTIVES, records=records, load_levels=LEVELS)
    assert plain.verdict is not None and "names no baseline" in plain.verdict.headline


def test_relaunches_that_repeat_one_figure_separate_only_beyond_their_measurement_windows() -> None:
    """A deterministic simulator relaunches bit for bit: zero spread on both sides used to make any difference
    separable (Welch's p = 0), and a small study's headline read "beats your current configuration ... by +0.0%
    [+0.0% .. +0.0%]". A spread of zero is not a measurement without noise: such relaunches are judged by their
    measurement windows, and without windows they separate nothing."""
    a = _study(spec_at_8=[1000.1] * 2, plain_at_8=[1000.05] * 2, base_at_8=[1000.0] * 2, relaunch_window_pct=2.0)
    d = a.finalists.decision
    assert d is not None and d.method == "tie" and set(d.tied) == {0, 1, 2}  # 0.01% apart, within +-2% windows
    assert "repeat one figure" in d.summary and all(c.p_value is None for c in d.comparisons)
    v = a.verdict
    assert v is not None and v.kind == "no_better" and "beats your current configuration" not in v.headline
    assert "a tie" in v.headline and "measurement-window intervals" in v.headline
    gain8 = next(g for g in v.gains if g.concurrency == 8)
    assert gain8.difference is not None and not gain8.difference.separable
    assert gain8.difference.basis == "measurement windows" and gain8.difference.low_pct < 0 < gain8.difference.high_pct

    far = _study(spec_at_8=[1400.0] * 2, plain_at_8=[1000.0] * 2, base_at_8=[1000.0] * 2, relaunch_window_pct=2.0)
    d = far.finalists.decision
    assert d is not None and d.method == "separable" and d.winner == 1 and "measurement windows" in d.summary
    v = far.verdict
    assert v is not None and v.kind == "beats" and "+40.0%" in v.headline

    bare = _study(spec_at_8=[1400.0] * 2, plain_at_8=[1000.0] * 2, base_at_8=[1000.0] * 2)  # no windows either
    d = bare.finalists.decision
    assert d is not None and d.method == "tie"
    v = bare.verdict
    assert v is not None and v.kind == "no_better" and "(no interval)" in v.headline


def test_the_speculation_schedule_rests_on_the_same_launches_and_states_the_tie() -> None:
    """A speculative config whose first launch (1,300 tok/s) beat the best off config but whose relaunches average
    903 against 1,000: the schedule used the first launch alone, said "speculate, 1.30x" at level 8 while the regimes
    and speculation on vs off (means over the launches) said off leads and the two tie. Now it says what they say."""
    a = _study(spec_at_8=[1300, 700, 710], plain_at_8=[1000, 1005, 995], base_at_8=[900, 905, 895])
    comp = next(c for c in a.crossover.comparisons if c.concurrency == 8)
    assert comp.tie and comp.plain is not None and comp.plain.number == 2
    assert a.schedule is not None
    row = next(r for r in a.schedule.levels if r.concurrency == 8)
    assert (row.choice, row.speculative, row.tie) == (2, False, True)
    assert row.spec_tok_per_s == comp.spec_tok_per_s and row.plain_tok_per_s == comp.plain_tok_per_s
    assert "| 8 | off: trial 2 |" in render_report(a) and "(tie: within the noise)" in render_report(a)


def test_a_tie_over_relaunches_says_how_many_relaunches_would_separate_it() -> None:
    """The device study h100-real-ngram-verdict: no speculation relaunched at 8,602 and 14,522 tok/s, the user's NGRAM
    chain at 6,912 and 5,959: +80%, yet a tie at 2 relaunches a side. The headline says what would decide it: at that
    spread, 6 relaunches a side separate a difference that large about half the time."""
    a = _study(spec_at_8=[8601.9, 14522.2], plain_at_8=[3000.0, 3100.0], base_at_8=[6912.4, 5959.0])
    v = a.verdict
    assert v is not None and v.kind == "no_better" and v.recommended == 1
    assert "a tie. At the spread these relaunches show, 6 relaunches a side (`study.finalists.rounds: 6`)" in v.headline
    # A baseline that repeats one figure: Welch's test still runs on the other side's spread (it said "more than 20").
    steady = _study(spec_at_8=[8601.9, 14522.2], plain_at_8=[3000.0, 3100.0], base_at_8=[6000.0, 6000.0]).verdict
    assert steady is not None and steady.kind == "no_better"
    assert "5 relaunches a side (`study.finalists.rounds: 5`)" in steady.headline
    beats = _study(spec_at_8=[1400.0, 1410.0], plain_at_8=[1000.0, 1005.0], base_at_8=[1000.0, 1010.0])
    assert beats.verdict is not None and beats.verdict.kind == "beats" and "rounds" not in beats.verdict.headline


def test_equal_latencies_are_a_zero_gain_not_a_negative_one() -> None:
    """A latency objective (minimize) flips the gain's sign: equal means came out as -0.0, and the verdict, the
    gains table and best.json read "-0.0%", a loss pointing the wrong way."""
    objectives = [Objective("ttft_ms.p99", "max", "minimize")]
    records = [make_record(0, tputs={1: 50, 8: 400}, flags=BASE), make_record(1, tputs={1: 50, 8: 400}, flags={})]
    a = analyze(study_name="demo", objectives=objectives, records=records, load_levels=LEVELS, baseline=BASE)
    assert a.verdict is not None and a.verdict.gains
    for g in a.verdict.gains:
        assert g.difference is not None and str(g.difference.gain_pct) == "0.0"
    text = render_report(a)
    assert "+0.0% (no interval)" in text and "-0.0%" not in text


def test_the_finalist_table_says_no_spread_not_n_below_2_for_relaunches_that_repeat_one_figure() -> None:
    """A deterministic simulator's finalists relaunch 2 times to one figure: Welch's p is undefined, and the table said
    "n<2" beside "2/2" clean launches."""
    a = _study(spec_at_8=[1400.0] * 2, plain_at_8=[1000.0] * 2, base_at_8=[1000.0] * 2, relaunch_window_pct=2.0)
    rows = [line for line in render_report(a).splitlines() if line.startswith("| ") and " 2/2 " in line]
    assert rows and all("n<2" not in r for r in rows)
    behind = [r for r in rows if "| leader |" not in r]
    assert behind and all(r.endswith("| no spread |") for r in behind)


def test_a_latency_primary_does_not_claim_the_recommendation_leads_the_throughput_regimes() -> None:
    """With `ttft_ms.p99@max` (minimize) as the primary objective, the recommendation is the lowest TTFT, the regime
    table names the fastest config at that level, and the report said the recommendation leads there."""
    objectives = [Objective("ttft_ms.p99", "max", "minimize")]
    fast, low_ttft = make_record(0, tputs={1: 50, 8: 900}, flags=BASE), make_record(1, tputs={1: 50, 8: 400}, flags={})
    records = [
        replace(fast, objectives={"ttft_ms.p99@max": 300.0}),
        replace(low_ttft, objectives={"ttft_ms.p99@max": 100.0}),
    ]
    a = analyze(study_name="demo", objectives=objectives, records=records, load_levels=LEVELS)
    assert a.best.record is not None and a.best.record.number == 1
    assert a.regimes[-1].record is not None and a.regimes[-1].record.number == 0
    text = render_report(a)
    assert "the recommendation leads" not in text and "which this table does not rank by" in text


def test_no_regime_recommends_a_config_whose_every_relaunch_missed_a_constraint() -> None:
    """Trial 1 met the SLO in its own launch, then missed it in both relaunches: the finalist stage counts none of
    them, yet the regime table ranked it at concurrency 1 by those relaunches' figures, as a config that meets every
    constraint."""
    records = [
        make_record(0, tputs={1: 50, 8: 800}, flags=BASE),
        make_record(1, tputs={1: 100, 8: 1000}, flags={"mem-fraction-static": 0.8}),
    ]
    runs = []
    for n, (low, high) in {0: (50, 800), 1: (100, 1000)}.items():
        for r in (1, 2):
            over = {"ttft_ms.p99@max": 50.0} if n == 1 else None
            rec = make_record(n, tputs={1: low + r, 8: high + r}, flags=records[n].flags, constraints=over)
            runs.append(FinalistRun(1, r, n, f"t{n:04d}", replace(rec, trial_id=f"t{n:04d}-f1r{r}")))
    outcome = study_outcome(
        records, [StagePlan(1, (1, 0), 2)], runs, objective=OBJECTIVES[0], alpha=0.05, count=1, baseline=BASE
    )
    assert outcome.decision is not None and (outcome.decision.method, outcome.decision.winner) == ("single", 0)
    a = analyze(
        study_name="demo", objectives=OBJECTIVES, records=records, load_levels=LEVELS, finalists=outcome, baseline=BASE
    )
    for choice in a.regimes:
        assert choice.record is not None and choice.record.number == 0 and choice.tied == ()


def test_a_gain_over_a_goodput_of_zero_is_no_percentage() -> None:
    """The baseline's goodput at the objective's level is 0 (no request met the SLO): the gain was the difference
    times 100 ("+350.0%" for 3.5 req/s), as if a percentage of 1 req/s. It is +inf%, without an interval, and
    best.json holds no infinity."""
    import json

    from autotune.bench.stats import Interval

    def with_goodput(rec, value, half):  # type: ignore[no-untyped-def]
        iv = {"goodput": Interval(value, half, 3, value - half, value + half)}
        levels = tuple(replace(lv, goodput=value, intervals=iv) for lv in rec.bench.levels)
        return replace(rec, bench=replace(rec.bench, levels=levels), objectives={"goodput@8": value})

    records = [
        with_goodput(make_record(0, tputs={1: 50, 8: 800}, flags=BASE), 0.0, 0.0),
        with_goodput(make_record(1, tputs={1: 50, 8: 1000}, flags={}), 3.5, 0.1),
    ]
    objectives = [Objective("goodput", "8", "maximize")]
    a = analyze(study_name="demo", objectives=objectives, records=records, load_levels=LEVELS, baseline=BASE)
    v = a.verdict
    assert v is not None and v.kind == "beats" and "+inf% (from 0" in v.headline and "350" not in v.headline
    json.dumps(v.to_json(), allow_nan=False)


def test_the_report_names_the_relaunched_baseline_instead_of_counting_it_among_the_top_configs() -> None:
    """Two leaders and the baseline relaunched read "The top 3 feasible configs were relaunched": the baseline is
    not a top config (it may even miss a constraint)."""
    a = _study(spec_at_8=[1300, 1310], plain_at_8=[1000, 1005], base_at_8=[900, 905])
    text = render_report(a)
    assert "The top 3 feasible configs" not in text
    assert "Trials 1, 2, 0 (the top feasible configs and the baseline, trial 0) were relaunched" in text
