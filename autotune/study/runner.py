"""One trial, end to end: config -> validity rules -> deploy -> ready -> benchmark -> teardown -> record.

Runs inside a Ray Tune trial. ``run_trial`` does the I/O through two seams, a ``Deployer`` (Ray Serve in a study) and
the ``Replica`` it hands back (``autotune.trial.replica``); ``observe`` collects the replica's typed answers and ``assemble``
turns them into the ``TrialRecord`` without side effects. Every outcome (invalid point, failed launch, crash under
load, Ray error) becomes a record; nothing here raises past ``run_trial``, so the study goes on and the sampler learns
from failures.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from importlib import metadata
from typing import Any

from autotune import __version__
from autotune.bench.server_api import FLUSH_RETRY_S
from autotune.bench.types import BenchPlan
from autotune.core.errors import AutotuneError, NodeLostError, failure_kind, rejected_flags
from autotune.core.secrets import (
    redact_argv,
    redact_env,
    redact_flags,
    redact_text,
    secret_values,
)
from autotune.core.trial import TrialConfig
from autotune.engines import engine_for as registered_engine
from autotune.engines.base import Engine
from autotune.policy.prescreen import launched_config
from autotune.progress.events import Phase, TrialEvent
from autotune.space import StudySpec
from autotune.trial import inbox
from autotune.trial.launched import Launched, read_launched
from autotune.trial.records import EngineInfo, FailureKind, TrialOutcome, TrialRecord
from autotune.trial.replica import BenchRun, Deployer, DeployRequest, Failure, Ready, Replica, ServerReport, Teardown
from autotune.trial.score import failed_score, objective_key, score


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def engine_for(spec: StudySpec) -> Engine:
    """The study's engine, from the engine registry (``autotune.engines``)."""
    return registered_engine(spec)


def app_name(number: int, trial_id: str) -> str:
    return f"trial-{number:03d}-{trial_id}"


def versions() -> dict[str, str]:
    """Versions of what ran the trial, read from package metadata (nothing is imported)."""
    out = {"autotune": __version__, "python": platform.python_version()}
    for dist in ("ray", "optuna", "httpx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


def base_record(
    spec: StudySpec,
    cfg: TrialConfig | None,
    *,
    trial_id: str,
    number: int,
    params: Mapping[str, Any],
    started_at: str,
    engine: Engine | None = None,
) -> TrialRecord:
    """The record before the launch. ``engine``: the study's (default: from the registry)."""
    if cfg is not None:
        engine = engine or engine_for(spec)
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
        accept_source=engine.model.accept_source(cfg.flags, cfg.env, engine.simulated) if cfg and engine else None,
        versions=versions(),
        started_at=started_at,
    )


def failed_record(
    record: TrialRecord,
    spec: StudySpec,
    kind: FailureKind,
    message: str,
    log_tail: str = "",
    outcome: TrialOutcome = TrialOutcome.FAILED,
    *,
    finished_at: str | None = None,
) -> TrialRecord:
    s = failed_score(spec.objectives, spec.constraints)
    return replace(
        record,
        outcome=outcome,
        failure=kind,
        message=message,
        log_tail=log_tail,
        objectives=s.objectives,
        constraints=s.constraints,
        feasible=False,
        finished_at=finished_at or now_iso(),
    )


def engine_info(
    spec: StudySpec, engine: Engine, report: ServerReport | None, gpus: int, declared_gpu: str | None = None
) -> EngineInfo:
    """The record's engine (``Engine.identity``). ``declared_gpu``: the GPU the engine declares before it runs
    (``Engine.declared_gpu_name``: a simulator profile's), for a server that never answered (a failed launch), so
    that its trial names the same hardware as the study's other trials."""
    report = report or ServerReport()
    identity = engine.identity(
        release=report.release,
        server_info=report.server_info or {},
        gpu_names=report.gpu_names,
        gpus=gpus,
        declared_gpu=declared_gpu,
    )
    return EngineInfo(
        **dataclasses.asdict(identity), node=report.node, cpus=report.cpus, cpu_isolation=report.cpu_isolation
    )


@dataclass(frozen=True)
class Observation:
    """What the runner saw of one deployed trial, in order; None where the trial did not get that far."""

    app: str
    serve_run_s: float
    ready: Ready | Failure | None = None
    bench: BenchRun | None = None
    report: ServerReport | None = None
    teardown: Teardown | None = None
    error: Failure | None = None  # a call to the replica raised (the replica died, Ray timed out, ...)
    release_error: str = ""  # giving the replica back failed
    deploy_to_ready_s: float | None = None  # deploy call -> ready
    replica_start_s: float | None = None  # deploy call -> the replica began the launch
    teardown_s: float | None = None


def _as_failure(exc: BaseException) -> Failure:
    return Failure(failure_kind(exc), f"{type(exc).__name__}: {exc}", getattr(exc, "log_tail", ""), rejected_flags(exc))


EventSink = Callable[[TrialEvent], None]


def observe(
    replica: Replica,
    plan: BenchPlan,
    *,
    name: str,
    app: str,
    serve_run_s: float,
    t_deploy: float,
    deploy_epoch: float,
    event: Callable[..., TrialEvent],
    send: EventSink,
    gone: Callable[[Failure], bool] | None = None,
) -> Observation:
    """Wait for the server, benchmark it when ready, read its report, and stop it (always, unless ``gone`` says the
    replica's node was lost: nothing is left there to stop, and the call would wait for a replica Serve cannot
    place). Never raises.

    ``event(phase, **fields)`` makes the trial's progress event and ``send`` passes it on."""
    ready: Ready | Failure | None = None
    bench: BenchRun | None = None
    report: ServerReport | None = None
    error: Failure | None = None
    deploy_to_ready: float | None = None
    try:
        ready = replica.wait_ready(name)
        deploy_to_ready = time.monotonic() - t_deploy
        if isinstance(ready, Ready):
            send(event(Phase.READY, seconds=deploy_to_ready))
            bench = replica.benchmark(plan)
        report = replica.info()
    except Exception as exc:  # noqa: BLE001 - any error of the replica is recorded; the study goes on
        error = _as_failure(exc)
    send(event(Phase.TEARING_DOWN))
    t_down = time.monotonic()
    if error is not None and gone is not None and gone(error):
        return Observation(
            app=app,
            serve_run_s=serve_run_s,
            ready=ready,
            bench=bench,
            report=None,
            teardown=Teardown(error="the replica's node was lost"),
            error=error,
            teardown_s=time.monotonic() - t_down,
        )
    try:
        # SIGKILL and return: the server's exit overlaps the next trial's start, whose replica waits for the GPUs to
        # read free before it launches (phases.gpu_wait_s of that trial).
        teardown = replica.stop_server(defer=True)
    except Exception as exc:  # noqa: BLE001
        teardown = Teardown(error=f"{type(exc).__name__}: {exc}")
    init_epoch = report.init_epoch if report is not None else None
    return Observation(
        app=app,
        serve_run_s=serve_run_s,
        ready=ready,
        bench=bench,
        report=report,
        teardown=teardown,
        error=error,
        deploy_to_ready_s=deploy_to_ready if isinstance(ready, Ready) else None,
        replica_start_s=(init_epoch - deploy_epoch) if init_epoch else None,
        teardown_s=time.monotonic() - t_down,
    )


def _failure_of(engine: Engine, obs: Observation) -> Failure | None:
    """Why the trial failed, from what the replica said, or None when it completed."""
    if obs.error is not None:
        return obs.error
    if isinstance(obs.ready, Failure):
        return obs.ready
    bench = obs.bench
    if bench is None:
        return Failure(FailureKind.UNKNOWN, "the replica answered neither ready nor failed")
    if bench.ok and not bench.alive:
        return Failure(FailureKind.CRASHED_UNDER_LOAD, "server exited during the benchmark")
    if not bench.ok:
        kind = FailureKind.BENCH_ERROR if bench.alive else engine.classify_failure(bench.log_tail, ready=True)
        return Failure(kind, bench.message, bench.log_tail)
    return None


def _notes(obs: Observation) -> list[str]:
    notes = []
    if obs.teardown is not None and obs.teardown.error:
        notes.append(f"teardown: {obs.teardown.error}")
    if obs.release_error:
        notes.append(f"release: {obs.release_error}")
    if obs.report is not None and obs.report.orphans_killed:
        notes.append(f"the slot's replica killed {obs.report.orphans_killed} server(s) left by a replica Ray restarted")
    if obs.report is not None and obs.report.omp_num_threads_in_replica is not None:
        notes.append(f"replica OMP_NUM_THREADS={obs.report.omp_num_threads_in_replica} (removed from the server env)")
    return notes


def assemble(
    spec: StudySpec,
    engine: Engine,
    record: TrialRecord,
    obs: Observation,
    *,
    gpus: int,
    trial_wall_s: float,
    finished_at: str,
    declared_gpu: str | None = None,
) -> TrialRecord:
    """The trial's record from what the replica said (pure: no I/O, no clock). ``declared_gpu``:
    ``engine.declared_gpu_name()``."""
    report = obs.report
    log_text = report.log_text if report is not None else ""
    ready_s = obs.ready.ready_s if isinstance(obs.ready, Ready) else None
    bench = obs.bench.result if obs.bench is not None else None
    phases = replace(
        engine.parse_log_phases(log_text),
        launch_to_ready_s=ready_s,
        deploy_to_ready_s=obs.deploy_to_ready_s,
        bench_s=obs.bench.bench_s if obs.bench is not None else None,
        serve_run_s=obs.serve_run_s,
        preflight_s=report.preflight_s if report else None,
        gpu_wait_s=report.gpu_wait_s if report else None,
        replica_start_s=obs.replica_start_s,
        teardown_s=obs.teardown_s,
        trial_wall_s=trial_wall_s,
    )
    einfo = replace(
        engine_info(spec, engine, report, gpus, declared_gpu),
        serve_app=obs.app,
        replica_launches=report.launches if report is not None else None,
    )
    record = replace(
        record,
        engine=einfo,
        phases=phases,
        bench=bench,
        argv=list(report.argv) if report is not None and report.argv else record.argv,
        launch=read_launched(engine.name, report.argv)[0] if report is not None and report.argv else record.launch,
        unset_env=list(report.unset_env) if report is not None and report.argv else record.unset_env,
    )
    notes = _notes(obs)
    failure = _failure_of(engine, obs)
    if failure is not None:
        tail = failure.log_tail or "\n".join(log_text.splitlines()[-40:])
        message = failure.message + ("; " + "; ".join(notes) if notes else "")
        rec = failed_record(record, spec, failure.kind, message, tail, finished_at=finished_at)
        return replace(rec, rejected_flags=list(failure.flags))
    assert bench is not None  # _failure_of returns a failure unless the benchmark completed
    s = score(bench, spec.objectives, spec.constraints)
    return replace(
        record,
        outcome=TrialOutcome.COMPLETE,
        failure=None,
        objectives=s.objectives,
        constraints=s.constraints,
        feasible=s.feasible,
        message="; ".join(notes),
        finished_at=finished_at,
        log_tail="\n".join(log_text.splitlines()[-20:]),
    )


# A replica that stopped answering (a Ray error) may have lost its node; a failure the server itself reported (out of
# memory, a crash under load) is the configuration's.
INFRASTRUCTURE_SUSPECT = (FailureKind.DEPLOY_ERROR, FailureKind.UNKNOWN)


RAY_MARGIN_S = 300.0  # beyond what a replica call may take by its own limits: Ray's scheduling and a loaded host


def bench_wait_s(plan: BenchPlan) -> float:
    """How long the runner waits for a replica's benchmark: the longest ``plan`` may run within its own limits. Each
    level runs its warmup and up to ``max_windows`` windows, each stopped at ``level_timeout_s`` (a per-window limit),
    plus its cache flush (``FLUSH_RETRY_S``) and two ``/server_info`` reads; the greedy prompts run one at a time
    before the levels."""
    windows = plan.max_windows + (1 if plan.warmup_requests > 0 else 0)
    per_level = windows * plan.level_timeout_s + FLUSH_RETRY_S + 2 * plan.request_timeout_s
    greedy = plan.greedy_prompts * plan.request_timeout_s
    return len(plan.levels()) * per_level + greedy + 2 * plan.request_timeout_s + RAY_MARGIN_S


def serve_deployer(spec: StudySpec) -> Deployer:
    from autotune.serve.handle import ServeDeployer

    return ServeDeployer(ready_wait_s=spec.ready_timeout_s + RAY_MARGIN_S, bench_wait_s=bench_wait_s(spec.plan))


def run_trial(
    spec: StudySpec,
    params: Mapping[str, Any],
    *,
    trial_id: str,
    number: int,
    owner: str | None = None,
    deployer: Deployer | None = None,
    send: EventSink | None = None,
) -> tuple[TrialRecord, str]:
    """Run one trial; returns its record and the server log text, secrets redacted. Never raises for trial-level
    failures. ``deployer`` puts the server on a replica (Ray Serve unless given); ``send`` takes the trial's progress
    events (the study's monitor, found by ``owner``, unless given)."""
    if send is None:
        from autotune.progress import monitor

        send = partial(monitor.send, owner)
    try:
        record, log_text, env = _run_trial(
            spec, params, trial_id=trial_id, number=number, owner=owner, deployer=deployer, send=send
        )
    finally:
        send(TrialEvent(number, trial_id, Phase.ENDED))  # it no longer runs (a relaunch gets no FINISHED)
    return redact_record(record, log_text, env, tuple(spec.server.secret_env), tuple(spec.server.secret_flags))


def relaunch(
    spec: StudySpec, params: dict[str, Any], trial_id: str, number: int, owner: str | None
) -> tuple[dict[str, Any], str]:
    """One finalist relaunch as the stage's Ray task runs it (``autotune.finalists.stage``): the record as JSON (what
    crosses Ray) and the server log."""
    record, log_text = run_trial(spec, params, trial_id=trial_id, number=number, owner=owner)
    return record.to_json(), log_text


def redact_record(
    record: TrialRecord,
    log_text: str,
    env: Mapping[str, str],
    extra: tuple[str, ...] = (),
    extra_flags: tuple[str, ...] = (),
) -> tuple[TrialRecord, str]:
    """The record and log with every secret redacted (autotune.core.secrets): values of variables (``env``, the server's
    real environment, and this process's; ``extra``: the study's server.secret_env) and of flags (``--api-key``;
    ``extra_flags``: the study's server.secret_flags), in the record's fields, its argv and every text."""
    values = secret_values({**os.environ, **record.env, **env}, extra)
    values += secret_values({k: v for k, v in record.flags.items() if v is not None}, extra_flags)
    values = sorted(set(values), key=len, reverse=True)

    def text(s: str) -> str:
        return redact_text(s, values)

    safe = replace(
        record,
        env=redact_env(record.env, extra),
        message=text(record.message),
        flags=redact_flags(record.flags, extra_flags),
        log_tail=text(record.log_tail),
        argv=[text(a) for a in redact_argv(record.argv, extra_flags)],
        launch=_redact_launch(record.launch, extra_flags, text),
    )
    return safe, text(log_text)


def _redact_launch(launch: Launched | None, extra_flags: Iterable[str], text: Callable[[str], str]) -> Launched | None:
    """The typed launch redacted as the argv is: secret flags' values, and secret text in every value."""
    if launch is None:
        return None
    safe = launch.redacted(extra_flags)
    return replace(safe, options=tuple((k, v if v is None else text(v)) for k, v in safe.options))


def _run_trial(
    spec: StudySpec,
    params: Mapping[str, Any],
    *,
    trial_id: str,
    number: int,
    owner: str | None,
    deployer: Deployer | None,
    send: EventSink,
) -> tuple[TrialRecord, str, dict[str, str]]:
    t_trial = time.monotonic()
    event = partial(TrialEvent, number, trial_id)
    send(event(Phase.STARTED, params=dict(params)))
    engine = engine_for(spec)
    cfg = engine.normalize(launched_config(spec, params))
    record = base_record(
        spec, cfg, trial_id=trial_id, number=number, params=params, started_at=now_iso(), engine=engine
    )
    problems = engine.violations(cfg)
    if problems:
        return (
            failed_record(record, spec, FailureKind.INVALID_CONFIG, "; ".join(problems), outcome=TrialOutcome.INVALID),
            "",
            dict(cfg.env),
        )

    lspec = engine.launch_spec(cfg, port=0, nccl_port=0, ready_timeout_s=spec.ready_timeout_s)
    record = replace(
        record,
        argv=list(lspec.argv),
        launch=read_launched(lspec.engine, lspec.argv)[0],
        env=dict(lspec.env),
        unset_env=list(lspec.unset_env),
    )
    name = app_name(number, trial_id)
    deployer = deployer or serve_deployer(spec)
    send(event(Phase.LAUNCHING))
    t_deploy = time.monotonic()
    try:
        deployed = deployer.deploy(
            DeployRequest(
                name=name,
                study=spec.name,
                launch=lspec,
                owner=owner,
                number=number,
                trial_id=trial_id,
                cpu_isolation=spec.cpu_isolation != "off",
            )
        )
    except NodeLostError:
        raise  # Ray Tune reruns the trial on another slot; nothing is recorded for this attempt
    except AutotuneError as exc:
        return failed_record(record, spec, failure_kind(exc), str(exc)), "", dict(lspec.env)
    check = getattr(deployer, "node_lost", None)  # a deployer that pins slots to nodes (ServeDeployer)
    lost = ""

    def gone(failure: Failure) -> bool:
        """Whether the replica stopped answering because its node was lost (asked of Ray, which may take seconds)."""
        nonlocal lost
        if check is not None and failure.kind in INFRASTRUCTURE_SUSPECT:
            lost = check(deployed)
        return bool(lost)

    obs = observe(
        deployed.replica,
        spec.plan,
        name=name,
        app=deployed.app,
        serve_run_s=deployed.serve_run_s,
        t_deploy=t_deploy,
        deploy_epoch=deployed.deploy_epoch,
        event=event,
        send=send,
        gone=gone,
    )
    release_error = deployer.release(deployed)
    if lost:
        raise NodeLostError(f"trial {number} ({trial_id}): {lost} mid-trial; it is retried on another GPU slot")
    obs = replace(obs, release_error=release_error)
    record = assemble(
        spec,
        engine,
        record,
        obs,
        gpus=lspec.gpus,
        trial_wall_s=time.monotonic() - t_trial,
        finished_at=now_iso(),
        declared_gpu=engine.declared_gpu_name(),
    )
    return record, obs.report.log_text if obs.report is not None else "", dict(lspec.env)


def tune_trainable(spec: StudySpec, owner: str | None = None):
    """The Ray Tune function trainable for a study. ``owner`` tags its servers for the orphan sweep."""

    def trainable(config: dict[str, Any]) -> None:
        from ray import tune

        ctx = tune.get_context()
        record, log_text = run_trial(
            spec, config["params"], trial_id=ctx.get_trial_id(), number=int(config["number"]), owner=owner
        )
        first = spec.objectives[0]
        value = record.objectives.get(objective_key(first.metric, first.level), 0.0)
        # the record and its log go to the study's inbox (autotune.trial.inbox); Tune carries what it shows
        inbox.deliver(owner, ctx.get_trial_id(), record.to_json(), log_text)
        tune.report(
            {
                "objective0": value,
                "feasible": record.feasible,
                "outcome": record.outcome.value,
                "failure": record.failure.value if record.failure else "",
                inbox.RECORD_REF: ctx.get_trial_id(),
            }
        )

    return trainable
