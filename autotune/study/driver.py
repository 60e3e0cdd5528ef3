"""The search driver: wires the store, the Optuna study, Ray (Tune + Serve) and the exporter together.

Only this module and ``runner`` wire steps together; everything else is importable and testable alone.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from autotune.core.errors import AutotuneError
from autotune.finalists.choice import missing_slots, next_stage, stage_finalists
from autotune.finalists.outcome import StagePlan
from autotune.finalists.stage import run_stage
from autotune.finalists.store import FinalistStore
from autotune.policy import stopping
from autotune.progress.console import Console, Verbosity
from autotune.progress.noise import LOG_NAME as RAY_LOG
from autotune.progress.noise import ray_output_to_log
from autotune.progress.pump import EventPump, create_monitor, finished_event
from autotune.space import StudySpec
from autotune.study.cluster import (
    ClusterRequest,
    bounded,
    cpu_shortfall,
    ignore_sigint,
    port_busy,
    start_ray,
    start_serve,
    stop_orphans,
    stop_serve,
)
from autotune.study.export_step import export_and_say
from autotune.study.interrupts import (
    RayWatchdog,
    StopState,
    StudyCancelled,
    keep_sigterm,
    ray_probe,
    stop_handlers,
)
from autotune.study.nodes import (
    EVENTS,
    TRIAL_RETRIES,
    NodeEvent,
    NodeWatcher,
    SlotLimiter,
    driver_node,
    sweep_every_node,
)
from autotune.study.optuna_study import reconcile
from autotune.study.runner import base_record, failed_record, now_iso, relaunch, tune_trainable
from autotune.study.searcher import OptunaStudySearcher
from autotune.study.storage import StorageLock, open_shared_study, redact_url, refuse_fresh_on
from autotune.study.studylock import StudyLock
from autotune.study.timebox import TimeBox, relaunch_wall, stage_launches
from autotune.trial import inbox, registry, slots
from autotune.trial.records import FailureKind, TrialRecord
from autotune.trial.store import StudyStore


def _spec_json(spec: StudySpec) -> dict[str, Any]:
    """The spec as it reads back from ``study.json`` (tuples as lists), so a resume can compare the two."""
    return json.loads(json.dumps(spec.to_json(), default=str))


class StudyDriver:
    def __init__(
        self,
        spec: StudySpec,
        *,
        results_dir: Path,
        address: str | None = None,
        num_gpus: int | None = None,
        max_concurrent: int | None = None,
        dashboard_port: int = 8265,
        serve_port: int = 8000,
        fresh: bool = False,
        stop_after_s: float | None = None,
        console: Console | None = None,
        storage: str | None = None,
        metrics_port: int | None = None,
        finalists_only: bool = False,
    ) -> None:
        self.spec = spec
        self.finalists_only = finalists_only  # run only a (new) finalist stage of an existing study, then export
        self.finalist_store = FinalistStore(results_dir / spec.name)
        self._started = time.monotonic()  # the command's start: where the --stop-after-s box counts from
        self.store = StudyStore(results_dir / spec.name)
        self.console = console or Console()
        self.storage = storage  # the Optuna storage URL (default: SQLite in the study directory)
        self.metrics_port = metrics_port  # the local Ray node's Prometheus endpoint (default: Ray picks one)
        self._monitor: Any = None  # the study monitor (autotune.progress.monitor), alive while Tune runs
        self._pump: EventPump | None = None
        self.address = address
        self.num_gpus = num_gpus
        self.max_concurrent = max_concurrent
        self.dashboard_port = dashboard_port
        self.serve_port = serve_port
        self.fresh = fresh
        self.stop_after_s = stop_after_s
        # --stop-after-s against the finalist stage; it bounds the search, so --finalists-only (no search) runs the stage
        self.timebox = TimeBox(None if finalists_only else stop_after_s, stage_launches(spec))
        self._box_end: float | None = None  # epoch seconds when the time box ends (set as the search starts)
        self._slot_pool: Any = None  # the study's GPU slot pool (autotune.trial.slots), alive while Tune runs
        self.stop_reason = ""
        self.stopped = StopState()  # an interrupt or a lost Ray cluster
        self.time_box_note = ""  # set when --stop-after-s ended the run before the study's budget
        self.stop_rule_reason = ""  # why study.stop_when ended the search, if it did
        self._searcher: OptunaStudySearcher | None = None
        self._study: Any = None

    @property
    def owner(self) -> str:
        return str(self.store.root.resolve())

    # ------------------------------------------------------------------------------------------------------
    def _check_same_study(self) -> None:
        self._check_identity()
        path = self.store.root / "study.json"
        if not path.exists():
            return
        old = json.loads(path.read_text())
        new = _spec_json(self.spec)
        keys = (
            "engine",
            "params",
            "objectives",
            "constraints",
            "server",
            "sim",
            "workload",
            "plan",
            "workload_properties",  # every trial's environment
            "speculative_caps",  # a speculative point's launched flags
            # the seed points are enqueued only when a study opens empty, so an edited list or baseline would never
            # be launched, and the verdict would judge against a different (or unmeasured) current configuration
            "points_to_evaluate",
            "baseline_point",
        )
        changed = [  # a key an older study.json lacks was not recorded then: not a change
            k for k in keys if k in old and json.dumps(old[k], sort_keys=True) != json.dumps(new.get(k), sort_keys=True)
        ]
        if changed:
            raise AutotuneError(
                f"{self.store.root} holds a study with a different {', '.join(changed)}; resuming would mix results. "
                f"Use --study NEW_NAME, or --fresh to move the old directory aside (nothing is deleted)."
            )

    def _check_identity(self) -> None:
        """Refuse a directory whose study.json or records name another study (copied or renamed): resuming it under a
        new name would open a second Optuna study whose trial numbers collide with the records'."""
        name, root = self.spec.name, self.store.root
        found: list[tuple[str, str]] = []
        path = root / "study.json"
        if path.exists():
            try:
                found.append((str(json.loads(path.read_text()).get("name")), "study.json"))
            except (OSError, ValueError, AttributeError):
                pass
        found += [(r.study, "trials.jsonl") for r in self.store.read().records if r.study]
        other = next(((n, where) for n, where in found if n != name), None)
        if other is not None:
            raise AutotuneError(
                f"{root} holds study '{other[0]}' (its {other[1]}), not '{name}': the directory was copied or renamed. "
                f"Resume it under its own name (--study {other[0]}, from a results directory where it is named "
                f"{other[0]}), or start a new study '{name}' with --fresh (the directory is moved aside, nothing is "
                f"deleted)."
            )

    def _missing_record(self, number: int, trial_id: str, params: dict[str, Any], reason: str) -> TrialRecord:
        rec = base_record(self.spec, None, trial_id=trial_id, number=number, params=params, started_at=now_iso())
        return failed_record(rec, self.spec, FailureKind.UNKNOWN, reason)

    def _check_stop_rule(self, records: list[TrialRecord] | None = None) -> None:
        """Apply study.stop_when (autotune.policy.stopping) to the stored trials; once it fires, no new search trial starts
        (seed points the searcher launches last still run: autotune.policy.prescreen.deferred_seeds)."""
        rule = self.spec.stop_when
        if rule is None or self.stop_rule_reason:
            return
        verdict = stopping.check(records if records is not None else self.store.load(), self.spec.objectives[0], rule)
        if verdict.stop:
            self.stop_rule_reason = verdict.reason
            self.console.say(verdict.reason)
            self.store.write_json("study.json", {**_spec_json(self.spec), "stopped_early": verdict.reason})
            if (searcher := self._searcher) is not None:
                searcher.finish(verdict.reason)
                # this run starts only the deferred seed points more (the console's N and ETA), not its whole budget
                more = min(len(searcher.proposer.deferred), searcher.budget - searcher.suggested)
                self.console.planned = searcher.suggested + max(more, 0)

    def _box_left(self) -> float | None:
        """Seconds left of ``--stop-after-s``, which counts from the command's start (Ray's and Serve's start-up
        included); a box spent before the search starts leaves a millisecond, so that no trial starts."""
        if not self.stop_after_s:
            return None
        return max(1e-3, self.stop_after_s - (time.monotonic() - self._started))

    def _start_until(self) -> float | None:
        """Epoch seconds after which the time box starts no trial (the searcher's rule), for the console's ETA."""
        return None if self._box_end is None else self._box_end - self.timebox.reserve_s()

    def _on_record(self, record: TrialRecord, log_text: str) -> None:
        if (wall := relaunch_wall(record)) is not None and (said := self.timebox.add_trial(wall)):
            self.console.say(said)
        self.console.start_until = self._start_until()  # the finalist stage's reserve follows the trial times
        self.store.append(record, log_text)
        self._check_stop_rule()
        if self._pump is not None:
            self._pump.pump()  # the trial's last phase events first
        self.console.on_record(record)
        if self._monitor is not None:
            self._monitor.publish.remote(finished_event(self.spec, record).to_json())

    def _on_node_event(self, event: NodeEvent) -> None:
        """A GPU node lost or joined: said on the console, kept in events.jsonl, listed in the report."""
        self.console.say(event.text())
        with open(self.store.root / EVENTS, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(event.to_json()) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _start_ray(self) -> tuple[bool, float]:
        if not (self.address or os.environ.get("RAY_ADDRESS")):
            stop_orphans(self.store.root, self.console.say)  # a killed driver's cluster, found by its session
        with keep_sigterm():  # SIGTERM stays the driver's (Ray's own handler exits with code 15, saying nothing)
            return start_ray(
                self.spec,
                ClusterRequest(
                    self.address, self.num_gpus, self.dashboard_port, self.metrics_port, self._verbose, self.store.root
                ),
                self.console.say,
            )

    def run(self) -> int:
        """Run (or resume) the study under its lock; a second driver of the same study stops here, touching nothing."""
        lock = StudyLock(self.store.root).acquire()
        try:
            if self.fresh:
                if self.storage and self.store.root.exists():
                    refuse_fresh_on(self.storage, self.spec.name)
                moved = self.store.archive()  # the held lock file moves with it
                if moved:
                    self.console.say(f"moved the old study directory to {moved}")
                    fresh_lock = StudyLock(self.store.root).acquire()
                    lock.release()
                    lock = fresh_lock
            self._check_identity()  # a copied or renamed directory: refused before the storage's lock is written
            storage_lock = StorageLock(self.storage or self.store.db_url, self.spec.name).acquire()
            try:
                return self._run_locked()
            finally:
                storage_lock.release()
        finally:
            lock.release()

    def _run_locked(self) -> int:
        spec = self.spec
        self._check_same_study()
        self.store.repair()
        self.store.restore()  # a torn or unreadable middle record comes back from trials/ (not rerun)
        from autotune.export import half_export

        if half_export(self.store.root):
            self.console.error(f"warning: {half_export(self.store.root)}")
        if not (self.address or os.environ.get("RAY_ADDRESS")):
            registry.check_writable()  # the local replicas register their servers there
        killed = registry.sweep(self.owner)
        if killed:
            self.console.say(
                f"killed {len(killed)} server(s) left running by an earlier run of this study (its driver was killed)"
            )
        self.store.ensure()
        if spec.has_secrets:
            self.store.make_private()  # its records name secret variables and flags (their values are redacted)
        self.store.write_json("study.json", _spec_json(spec))
        records = self.store.load()
        study = open_shared_study(spec, self.storage or self.store.db_url, records, default=self.storage is None)
        if self.storage:
            self.console.say(f"Optuna study '{spec.name}' in {redact_url(self.storage)}")
        self._study = study  # the Optuna study, where the export is marked for optuna-dashboard
        done = reconcile(study, spec, records)
        remaining = spec.trials - done
        if self.finalists_only:
            if not done:
                raise AutotuneError(
                    f"--finalists-only: {self.store.root} has no finished trials; run the study first "
                    "(the same command without --finalists-only)"
                )
            if remaining > 0:
                self.console.say(f"--finalists-only: {remaining} trial(s) of the budget are left unrun")
            remaining = 0
            if self._stage_due(records) is None:
                why = "study.finalists.count is 0" if spec.finalists.count == 0 else "no feasible trial"
                self.console.say(f"--finalists-only: no finalist to relaunch: {why}")
        elif done:
            self.console.say(f"resuming study '{spec.name}': {done} finished trial(s) kept, {max(remaining, 0)} to run")
        self._check_stop_rule(records)
        if self.stop_rule_reason and remaining > 0:
            self.console.say(f"no further trials: {remaining} of the budget left unrun")
            remaining = 0
        if remaining > 0 or self._stage_due(records) is not None:
            with ray_output_to_log(self.store.root / "logs" / RAY_LOG, self.console, enabled=not self._verbose) as log:
                if log is not None:
                    self.console.say(f"Ray and Tune output goes to {log} (--verbose shows it here)")
                try:
                    self._run_tune(study, remaining, records)
                except KeyboardInterrupt:
                    if not self.stopped.stopping:
                        raise
        if self.stopped.stopping:
            return self._stopped_early()
        code = self._export(note=self.time_box_note)
        if self.stop_reason:
            self.console.error(f"\nerror: {self.stop_reason}")
            return 2
        return code

    def _stopped_early(self) -> int:
        """Record why the run stopped, export what it has under a banner, and say how to resume."""
        state = self.stopped
        self.store.append_stop(
            {
                "at": now_iso(),
                "signal": state.signal_name or None,
                "infrastructure": state.infrastructure or None,
                "pid": os.getpid(),
            }
        )
        try:
            self._export(note=state.banner)
        except Exception as exc:  # noqa: BLE001 - the stop message matters more than a partial export
            self.console.error(f"could not export the partial results: {type(exc).__name__}: {exc}")
        done = len(self.store.load())
        self.console.error(f"\n{state.banner}\n{done} finished trial(s) are saved in {self.store.root}.")
        return state.exit_code

    @property
    def _verbose(self) -> bool:
        return self.console.verbosity >= Verbosity.VERBOSE

    def _run_tune(self, study: Any, remaining: int, records: list[TrialRecord]) -> None:
        import ray
        from ray import tune

        spec = self.spec
        os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = (
            "1"  # Ctrl-C is the driver's (autotune.study.interrupts), not Tune's
        )
        started, total_gpus = self._start_ray()
        try:
            gpt = spec.gpus_per_trial
            if total_gpus < gpt:
                more = (
                    "join a larger cluster with --address, or for the simulator pass --num-gpus"
                    if started
                    else "add GPU nodes to the cluster (for the simulator, `ray start --num-gpus N` declares them)"
                )
                raise AutotuneError(
                    f"each trial needs {gpt} GPU(s) (tp_size x dp) but the Ray cluster has {total_gpus:g}. "
                    f"Lower server.tp_size, or {more}."
                )
            nnodes = spec.server.nnodes
            per_node = gpt // nnodes
            nodes = slots.live_gpu_nodes()
            # each node's slots from its own GPUs; a slot never spans nodes unless the study asks for nnodes > 1
            plan = slots.plan_slots(nodes, per_node, nnodes=nnodes)
            if not plan:
                raise AutotuneError(
                    f"each trial needs {per_node} GPU(s) on each of {nnodes} node(s), but the Ray cluster has no "
                    f"such node{'s' if nnodes > 1 else ''} (GPUs per node: {[n.gpus for n in nodes]}). Lower "
                    f"server.tp_size, set server.nnodes, or add nodes with {per_node} GPUs."
                )
            caps = [c for c in (spec.max_concurrent, self.max_concurrent) if c]
            cap = min(caps) if caps else None
            plan = slots.take(plan, cap)  # a cap takes slots across the nodes first
            conc = len(plan)
            # the pool and the trial functions stay on the driver's node (where it has CPUs): a lost GPU worker takes
            # neither
            home = driver_node(1.0)
            cpus = {n["NodeID"]: float(n.get("Resources", {}).get("CPU", 0)) for n in ray.nodes() if n.get("Alive")}
            if short := cpu_shortfall(plan, cpus, home):
                raise AutotuneError(short)
            self.timebox.at_once = conc
            self.timebox.trial_walls = [w for w in map(relaunch_wall, records) if w is not None]
            self.console.say(
                f"study '{spec.name}': {remaining} trial(s), engine {spec.engine}, {gpt} GPU(s) per "
                f"trial, {conc} at a time; results in {self.store.root}"
            )
            if self.timebox.start_text():
                self.console.say(self.timebox.start_text())
                if said := self.timebox.check():
                    self.console.say(said)
            if port_busy(self.serve_port):
                raise AutotuneError(
                    f"port {self.serve_port} on 127.0.0.1 is in use, so Ray Serve's HTTP proxy cannot start there; "
                    f"pass --serve-port with a free port (or stop what holds it)."
                )
            start_serve(self.serve_port)
            # one long-lived Serve app per trial that can run at once; the handle keeps the named pool alive
            self._slot_pool = slots.create(self.owner, plan, node_id=home)
            if len(nodes) > 1:
                per = {n.node_id: sum(1 for sl in plan if n.node_id in sl.nodes) for n in nodes}
                self.console.say(
                    "GPU slots per node: "
                    + ", ".join(f"{n.address or '?'} [{n.node_id[:8]}] {per[n.node_id]}" for n in nodes)
                )
            if remaining > 0:
                self._monitor = create_monitor(spec, self.owner, planned=len(records) + remaining, records=records)
                box_left = self._box_left()
                self._box_end = time.time() + box_left if box_left is not None else None
                self.console.study_started(
                    remaining,
                    conc,
                    [r.phases.trial_wall_s for r in records if r.phases.trial_wall_s],
                    start_until=self._start_until(),
                )
                searcher = OptunaStudySearcher(
                    spec,
                    study,
                    budget=remaining,
                    on_record=self._on_record,
                    make_missing_record=self._missing_record,
                    stop_after_s=box_left,
                    on_raw_result=self.store.save_raw,
                    inbox=inbox.create(self.owner),  # where trainables leave their records (autotune.trial.inbox)
                    reserve_s=self.timebox.reserve_s,
                    records=records,  # a resumed study's rules learn again from what its launches measured
                )
                self._searcher = searcher
                watcher = NodeWatcher(
                    self._slot_pool, spec.name, self.owner, per_node, self._on_node_event, nnodes=nnodes
                )
                # no Tune cap: a trial starts only while a slot is free (the slots follow the nodes lost and joined)
                limiter = SlotLimiter(searcher, lambda: watcher.capacity, cap)
                resources: Any = {"cpu": 0.5}
                if home is not None:
                    resources = tune.PlacementGroupFactory(
                        [{"CPU": 0.5}], bundle_label_selector=[{"ray.io/node-id": home}]
                    )
                tuner = tune.Tuner(
                    tune.with_resources(tune_trainable(spec, self.owner), resources),
                    tune_config=tune.TuneConfig(
                        search_alg=limiter, num_samples=remaining, reuse_actors=True
                    ),  # no new trainable process per trial
                    run_config=tune.RunConfig(
                        name=f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}",
                        storage_path=str((self.store.root / "tune").resolve()),
                        verbose=0,
                        # a trial whose node was lost (NodeLostError) runs again on another slot: the same Optuna
                        # trial and number, nothing told to the sampler about the interrupted attempt
                        failure_config=tune.FailureConfig(max_failures=TRIAL_RETRIES),
                    ),
                )

                def halt() -> None:
                    searcher.halted = True
                    searcher.infrastructure_lost = bool(self.stopped.infrastructure)

                try:
                    with (
                        stop_handlers(self.stopped, halt, self.console.error),
                        RayWatchdog(self.stopped, ray_probe()),
                        EventPump(self._monitor, self.console) as self._pump,
                        watcher,
                    ):
                        tuner.fit()
                except StudyCancelled:
                    pass  # the running trials are cancelled below (their servers go with Serve and the sweep)
                if self.stopped.infrastructure:
                    halt()
                self.stop_reason = searcher.stop_reason or limiter.stop_reason
                for note in searcher.rules.notes():
                    self.console.say(note)
                if searcher.proposer.exhausted:
                    self.console.say(
                        f"{searcher.proposer.exhausted}; {searcher.proposer.relaunched} launch(es) re-measured "
                        "measured points"
                    )
                if searcher.timed_out and not self.stopped.stopping:
                    self.time_box_note = self.timebox.stopped_note(len(self.store.load()), spec.trials)
                    self.console.say(f"\n{self.time_box_note}")
            if not self.stop_reason and not self.stopped.stopping:
                try:  # Ctrl-C: no new relaunch (the running one is stored); again, or SIGTERM: cancel it
                    with (
                        stop_handlers(self.stopped, lambda: None, self.console.error),
                        RayWatchdog(self.stopped, ray_probe()),
                    ):
                        self._run_finalists(conc)
                except StudyCancelled:
                    pass  # a relaunch cut short is not stored; the stage resumes it on the next run
        finally:
            self._slot_pool = None
            self._monitor = self._pump = None
            if self.stopped.infrastructure:
                ignore_sigint()  # Ray's driver-side core worker may still raise SIGINT about its dead raylet
                self.console.error(
                    f"the Ray cluster was lost ({self.stopped.infrastructure}); cleaning up what is local"
                )
                registry.sweep(self.owner)
                if started:
                    bounded(ray.shutdown, 15.0)
            else:
                try:
                    # the slot apps' replicas go, and with them any engine still running
                    stop_serve(spec.name, self.owner, own_cluster=started)
                finally:
                    # a server whose reaper died with its replica is killed and forgotten, on every node
                    sweep_every_node(self.owner)
                    registry.sweep(self.owner)
                    if started:
                        ray.shutdown()

    # ------------------------------------------------------------------------------------------- finalist stage
    def _stage_due(self, records: list[TrialRecord]) -> StagePlan | None:
        spec = self.spec
        first = spec.objectives[0]
        finalists = stage_finalists(records, first.key, first.direction, spec.finalists.count, spec.baseline)
        return next_stage(
            self.finalist_store.plans(),
            self.finalist_store.load(),
            finalists,
            spec.finalists.rounds,
            new_round=self.finalists_only,
        )

    def _run_finalists(self, concurrency: int) -> None:
        """Relaunch the top configs (see autotune.finalists.choice), unless the study's time box has run out."""
        if self.timebox.no_stage_room:
            self.console.say(self.timebox.skipped_text)
            return
        records = self.store.load()
        plan = self._stage_due(records)
        if plan is None:
            return
        trials = {r.number: r for r in records if r.number in plan.finalists}
        # the relaunches report their phases like trials, labelled as relaunches, through the study's monitor
        import ray

        monitor = self._monitor or create_monitor(self.spec, self.owner, planned=len(records), records=records)
        ray.get(monitor.relaunches_started.remote(), timeout=30)
        self.console.relaunches_started(len(missing_slots(plan, self.finalist_store.load())))
        with EventPump(monitor, self.console) as pump:

            def say(text: str) -> None:
                pump.pump()  # a relaunch's last phase lines before its result line
                self.console.say(text)

            run_stage(
                self.spec,
                plan,
                trials,
                self.finalist_store,
                relaunch=relaunch,
                lost=self._missing_record,
                owner=self.owner,
                concurrency=concurrency,
                say=say,
                halted=lambda: self.stopped.stopping,
                node_id=driver_node(0.5),  # the relaunch tasks stay on the driver's node, as the trial functions do
            )

    def _export(self, note: str = "") -> int:
        return export_and_say(
            self.spec,
            self.store,
            self.finalist_store,
            self.console,
            study=self._study,
            note=note,
            stopped_early=self.stop_rule_reason,
        )
