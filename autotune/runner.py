"""One trial, end to end: config -> validity rules -> Serve app -> ready -> benchmark -> teardown -> record.

Runs inside a Ray Tune trial. Every outcome (invalid point, failed launch, crash under load, Ray error) becomes a
``TrialRecord``; nothing here raises past ``run_trial``, so the study goes on and the sampler learns from failures.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import time
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from autotune import __version__, slots
from autotune.bench.plan_codec import plan_to_json
from autotune.bench.types import BenchResult
from autotune.engines import get_engine
from autotune.engines.base import Engine, parse_log_phases
from autotune.engines.sglang_rules import violations
from autotune.errors import AutotuneError
from autotune.progress import monitor as progress
from autotune.progress.events import Phase, TrialEvent
from autotune.records import EngineInfo, FailureKind, PhaseTimings, TrialOutcome, TrialRecord
from autotune.score import failed_score, score
from autotune.secrets import REDACTED, is_secret, redact_env, redact_text, secret_values
from autotune.space import StudySpec, to_trial_config
from autotune.trial import LaunchSpec, TrialConfig

if TYPE_CHECKING:
    from serve_app.app import EngineArgs


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def engine_for(spec: StudySpec) -> Engine:
    if spec.engine == "sim":
        assert spec.sim is not None  # load_study guarantees it
        return get_engine("sim", profile=spec.sim.profile, time_scale=spec.sim.time_scale, seed=spec.seed)
    return get_engine("sglang")


def app_name(number: int, trial_id: str) -> str:
    return f"trial-{number:03d}-{trial_id}"


def versions() -> dict[str, str]:
    out = {"autotune": __version__, "python": platform.python_version()}
    for mod in ("ray", "optuna", "httpx"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a version is informational
            out[mod] = "unknown"
    return out


def base_record(spec: StudySpec, cfg: TrialConfig | None, *, trial_id: str, number: int, params: Mapping[str, Any],
                started_at: str) -> TrialRecord:
    return TrialRecord(
        study=spec.name,
        trial_id=trial_id,
        number=number,
        params=dict(params),
        flags=dict(cfg.flags) if cfg else {},
        env=dict(cfg.env) if cfg else {},
        argv=[],
        outcome=TrialOutcome.FAILED,  # until the trial says otherwise: a record cut short is an unknown failure
        failure=FailureKind.UNKNOWN,
        message="the trial did not finish",
        workload_properties=dict(spec.workload_properties),
        versions=versions(),
        started_at=started_at,
    )


def failed_record(record: TrialRecord, spec: StudySpec, kind: FailureKind, message: str, log_tail: str = "",
                  outcome: TrialOutcome = TrialOutcome.FAILED) -> TrialRecord:
    s = failed_score(spec.objectives, spec.constraints)
    return replace(record, outcome=outcome, failure=kind, message=message, log_tail=log_tail,
                   objectives=s.objectives, constraints=s.constraints, feasible=False, finished_at=now_iso())


def engine_info(spec: StudySpec, engine: Engine, info: Mapping[str, Any] | None, gpus: int) -> EngineInfo:
    info = info or {}
    server_info = info.get("server_info") or {}
    sim = server_info.get("sim") if isinstance(server_info, dict) else None
    if engine.simulated:
        sim = sim or {}
        return EngineInfo(
            engine="sim",
            version=str(info.get("release") or engine.release()).split()[-1],  # autotune's release, not SGLang's it mimics
            simulated=True,
            gpu_name=f"SIMULATED {sim.get('gpu_name', '?')}",
            gpu_count=int(sim.get("gpu_count", gpus)),
            profile=spec.sim.profile if spec.sim else None,
            time_scale=float(sim.get("time_scale", spec.sim.time_scale if spec.sim else 1.0)),
            node=info.get("node"),
        )
    names = info.get("gpu_names") or []
    release = str(info.get("release") or engine.release())
    return EngineInfo(
        engine="sglang",
        version=str(server_info.get("version") or release.replace("sglang ", "")),
        simulated=False,
        gpu_name=names[0] if names else "unknown GPU",
        gpu_count=len(names) or gpus,
        node=info.get("node"),
    )


def run_trial(spec: StudySpec, params: Mapping[str, Any], *, trial_id: str, number: int,
              owner: str | None = None) -> tuple[TrialRecord, str]:
    """Run one trial; returns its record and the server log text, secrets redacted. Never raises for trial-level
    failures."""
    record, log_text, env = _run_trial(spec, params, trial_id=trial_id, number=number, owner=owner)
    return redact_record(record, log_text, env, spec.server.secret_env)


def redact_record(record: TrialRecord, log_text: str, env: Mapping[str, str],
                  extra: tuple[str, ...] = ()) -> tuple[TrialRecord, str]:
    """The record and log with every secret redacted: values of variables (``env``, the server's real environment, and
    this process's) and of flags (``--api-key``) whose names match autotune.secrets' pattern or are listed in ``extra``
    (the study's server.secret_env)."""
    flags = {k: str(v) for k, v in record.flags.items() if v is not None}
    values = secret_values({**os.environ, **record.env, **env, **flags}, extra)

    def text(s: str) -> str:
        return redact_text(s, values)

    safe = replace(record, env=redact_env(record.env, extra), message=text(record.message),
                   flags={k: (REDACTED if is_secret(k, extra) else v) for k, v in record.flags.items()},
                   log_tail=text(record.log_tail), argv=[text(a) for a in record.argv])
    return safe, text(log_text)


def _run_trial(spec: StudySpec, params: Mapping[str, Any], *, trial_id: str, number: int,
               owner: str | None = None) -> tuple[TrialRecord, str, dict[str, str]]:
    from serve_app.app import EngineArgs

    t_trial = time.monotonic()
    started = now_iso()
    progress.send(owner, TrialEvent(number, trial_id, Phase.STARTED, params=dict(params)))
    cfg = to_trial_config(spec, params)
    record = base_record(spec, cfg, trial_id=trial_id, number=number, params=params, started_at=started)
    problems = violations(cfg.flags, cfg.env, tp_size=cfg.tp_size)
    if problems:
        return failed_record(record, spec, FailureKind.INVALID_CONFIG, "; ".join(problems),
                             outcome=TrialOutcome.INVALID), "", dict(cfg.env)

    engine = engine_for(spec)
    lspec = engine.launch_spec(cfg, port=0, nccl_port=0, ready_timeout_s=spec.ready_timeout_s)
    record = replace(record, argv=list(lspec.argv), env=dict(lspec.env))
    name = app_name(number, trial_id)
    args = EngineArgs(name=name, engine=engine.name, argv=list(lspec.argv), env=dict(lspec.env),
                      unset_env=list(lspec.unset_env), host=lspec.host, port=0, gpus=lspec.gpus,
                      ready_timeout_s=lspec.ready_timeout_s, owner=owner, trial_number=number, trial_id=trial_id)
    pool = slots.find(owner)
    try:
        slot = slots.acquire(pool) if pool is not None else None
    except AutotuneError as exc:
        return failed_record(record, spec, FailureKind.DEPLOY_ERROR, str(exc)), "", dict(lspec.env)
    try:
        return (*_deploy_and_measure(spec, engine, lspec, record, args, slot, t_trial), dict(lspec.env))
    finally:
        if slot is not None:
            pool.release.remote(slot)


def _deploy_and_measure(spec: StudySpec, engine: Engine, lspec: LaunchSpec, record: TrialRecord, args: EngineArgs,
                        slot: int | None, t_trial: float) -> tuple[TrialRecord, str]:
    from ray import serve

    from serve_app.app import build_app, build_slot_app

    name = args.name
    # On a GPU slot the app keeps the slot's name and the trial's config is its user_config; without a slot pool
    # (a trial run outside the driver) the trial gets an application of its own.
    serve_app = slots.slot_app_name(spec.name, slot) if slot is not None else name
    app = build_slot_app(args.model_dump()) if slot is not None else build_app(args.model_dump())
    owner, event = args.owner, partial(TrialEvent, record.number, record.trial_id)
    progress.send(owner, event(Phase.LAUNCHING))
    t_deploy, t_deploy_epoch = time.monotonic(), time.time()
    try:
        handle = serve.run(app, name=serve_app, route_prefix=f"/{serve_app}")
        serve_run_s = time.monotonic() - t_deploy
    except Exception as exc:  # noqa: BLE001 - Ray raises several types; all mean the same here
        return failed_record(record, spec, FailureKind.DEPLOY_ERROR, f"Ray Serve could not deploy {serve_app}: {exc}"), ""

    info: dict[str, Any] | None = None
    bench: BenchResult | None = None
    failure: tuple[FailureKind, str, str] | None = None
    ready_s: float | None = None
    bench_s: float | None = None
    deploy_to_ready: float | None = None
    teardown: dict[str, Any] = {}
    try:
        ready = handle.wait_ready.remote(name).result(timeout_s=spec.ready_timeout_s + 300)
        deploy_to_ready = time.monotonic() - t_deploy
        if not ready["ok"]:
            failure = (FailureKind(ready["kind"]), ready["message"], ready.get("log_tail", ""))
        else:
            ready_s = float(ready["ready_s"])
            progress.send(owner, event(Phase.READY, seconds=deploy_to_ready))
            b = handle.benchmark.remote(plan_to_json(spec.plan)).result(timeout_s=spec.plan.level_timeout_s * 4)
            bench_s = float(b["bench_s"])
            if b["ok"]:
                bench = BenchResult.from_json(b["result"])
                if not b["alive"]:
                    failure = (FailureKind.CRASHED_UNDER_LOAD, "server exited during the benchmark", "")
            else:
                kind = engine.classify_failure(b.get("log_tail", ""), ready=True) if not b["alive"] \
                    else FailureKind.BENCH_ERROR
                failure = (kind, b["message"], b.get("log_tail", ""))
        info = handle.info.remote().result(timeout_s=120)
    except Exception as exc:  # noqa: BLE001 - replica died, Ray timeout, ...: recorded, the study goes on
        failure = (FailureKind.DEPLOY_ERROR, f"{type(exc).__name__}: {exc}", "")
    finally:
        progress.send(owner, event(Phase.TEARING_DOWN))
        t_down = time.monotonic()
        try:
            # SIGKILL and return: the server's exit overlaps the next trial's start, whose replica waits for the
            # GPUs to read free before it launches (phases.gpu_wait_s of that trial).
            teardown = handle.stop_server.remote(defer=True).result(timeout_s=180)
        except Exception as exc:  # noqa: BLE001
            teardown = {"error": f"{type(exc).__name__}: {exc}"}
        if slot is None:
            try:
                serve.delete(serve_app, _blocking=False)
            except Exception as exc:  # noqa: BLE001
                teardown["error"] = f"{teardown.get('error', '')} serve.delete failed: {exc}".strip()
        teardown_total = time.monotonic() - t_down

    log_text = (info or {}).get("log_text", "")
    parsed = parse_log_phases(log_text) if log_text else PhaseTimings()
    init_epoch = (info or {}).get("init_epoch")
    phases = replace(parsed, launch_to_ready_s=ready_s, deploy_to_ready_s=deploy_to_ready, bench_s=bench_s,
                     serve_run_s=serve_run_s, preflight_s=(info or {}).get("preflight_s"),
                     gpu_wait_s=(info or {}).get("gpu_wait_s"),
                     replica_start_s=(init_epoch - t_deploy_epoch) if init_epoch else None,
                     teardown_s=teardown_total, trial_wall_s=time.monotonic() - t_trial)
    einfo = replace(engine_info(spec, engine, info, lspec.gpus), serve_app=serve_app,
                    replica_launches=(info or {}).get("launches"))
    record = replace(record, engine=einfo, phases=phases, bench=bench,
                     argv=list((info or {}).get("argv") or record.argv))
    notes = []
    if teardown.get("error"):
        notes.append(f"teardown: {teardown['error']}")
    if info and info.get("orphans_killed"):
        notes.append(f"the slot's replica killed {info['orphans_killed']} server(s) left by a replica Ray restarted")
    if info and info.get("omp_num_threads_in_replica") is not None:
        notes.append(f"replica OMP_NUM_THREADS={info['omp_num_threads_in_replica']} (removed from the server env)")
    if failure is not None:
        kind, message, tail = failure
        tail = tail or "\n".join(log_text.splitlines()[-40:])
        rec = failed_record(record, spec, kind, message + ("; " + "; ".join(notes) if notes else ""), tail)
        return replace(rec, bench=bench), log_text
    assert bench is not None
    s = score(bench, spec.objectives, spec.constraints)
    record = replace(record, outcome=TrialOutcome.COMPLETE, failure=None, objectives=s.objectives, constraints=s.constraints,
                     feasible=s.feasible, message="; ".join(notes), finished_at=now_iso(),
                     log_tail="\n".join(log_text.splitlines()[-20:]))
    return record, log_text


def tune_trainable(spec: StudySpec, owner: str | None = None):  # type: ignore[no-untyped-def]
    """The Ray Tune function trainable for a study. ``owner`` tags its servers for the orphan sweep."""

    def trainable(config: dict[str, Any]) -> None:
        from ray import tune

        ctx = tune.get_context()
        record, log_text = run_trial(spec, config["params"], trial_id=ctx.get_trial_id(), number=int(config["number"]),
                                     owner=owner)
        first = spec.objectives[0]
        value = record.objectives.get(f"{first.metric}@{first.level}", 0.0)
        tune.report({"objective0": value, "feasible": record.feasible, "outcome": record.outcome.value,
                     "failure": record.failure.value if record.failure else "",
                     "record_json": json.dumps(record.to_json()), "log_text": log_text[-200_000:]})

    return trainable
