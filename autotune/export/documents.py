"""``best.json`` and ``pareto.json``: plain-data documents built from a StudyAnalysis."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from autotune.export.accessors import is_speculative
from autotune.export.analysis import StudyAnalysis
from autotune.export.banner import engine_banner
from autotune.export.command import ExportedServer, ServerCommand, option_argv
from autotune.export.pareto import Axis, ParetoPoint
from autotune.trial.records import TrialRecord

SCHEMA_VERSION = 1
PARETO_SCHEMA_VERSION = 2  # 2: axes are a list (the study's objectives where it has two or more), values by key


def _engine(rec: TrialRecord | None) -> dict[str, Any] | None:
    return asdict(rec.engine) if rec is not None and rec.engine is not None else None


def export_section(server: ExportedServer) -> dict[str, Any]:
    """What the exported scripts run and what they leave out (read by ``python -m autotune.verify``)."""

    def command(cmd: ServerCommand) -> dict[str, Any]:
        return {
            "module": cmd.module,
            "args": option_argv(cmd.options),
            "env": dict(cmd.env),
            "site_env": dict(cmd.site_env),
            "unset_env": list(cmd.unset_env),
            "host": cmd.host,
        }

    return {
        "production": command(server.production),
        "rehearsal": command(server.rehearsal) if server.rehearsal is not None else None,
        "tuned_on_simulator": server.rehearsal is not None,
        "study_only": [
            {"kind": s.kind, "name": s.name, "value": s.value, "reason": s.reason, "text": s.text}
            for s in server.removed
        ],
    }


INTERVALS_COVER = (
    "relaunches on the measured machine: every interval here is the variation between launches (or "
    "measurement windows) of one study on one machine; another machine, node or day adds its own "
    "variation (python -m autotune.verify measures it)"
)


def best_document(analysis: StudyAnalysis, server: ExportedServer | None = None) -> dict[str, Any]:
    choice = analysis.best
    feasible = sum(1 for r in analysis.records if r.feasible)
    verdict = analysis.verdict
    doc: dict[str, Any] = {
        "verdict": verdict.headline if verdict is not None else None,
        "baseline": verdict.to_json() if verdict is not None else None,
        "best_vs_worst": analysis.spread.to_json() if analysis.spread is not None else None,
        "intervals_cover": INTERVALS_COVER,
        "schema_version": SCHEMA_VERSION,
        "study": analysis.study_name,
        "engine_banner": analysis.banner,
        "objectives": [{"key": o.key, "direction": o.direction} for o in analysis.objectives],
        "load_levels": list(analysis.load_levels),
        "trials": len(analysis.records),
        "feasible_trials": feasible,
        "reason": choice.reason,
        "decided_by": choice.method,
        "stopped_early": analysis.stopped_early,
        "finalists": analysis.finalists.to_json() if analysis.finalists is not None else None,
        "output_gate": analysis.gate.to_json() if analysis.gate is not None else None,
        "output_gate_set_aside": [g.to_json() for g in analysis.gated_out],
        "best": None,
    }
    rec = choice.record
    if rec is None:
        return doc
    data = rec.to_json()
    doc["engine_banner"] = engine_banner(rec.engine, rec.env)
    doc["best"] = {
        "trial_id": rec.trial_id,
        "number": rec.number,
        "primary_objective": {"key": choice.objective.key, "value": choice.value},
        "objectives": dict(rec.objectives),
        "constraints": dict(rec.constraints),
        "speculative": is_speculative(rec),
        "params": data["params"],
        "flags": data["flags"],
        "env": dict(rec.env),
        "argv": list(rec.argv),
        "engine": _engine(rec),
        "levels": data["bench"]["levels"] if data.get("bench") else [],
        "server_accept_length": rec.bench.server_accept_length if rec.bench else None,
        "phases": data["phases"],
        "versions": dict(rec.versions),
    }
    if server is not None:
        doc["export"] = export_section(server)
    return doc


def _point(p: ParetoPoint, axes: Sequence[Axis]) -> dict[str, Any]:
    return {
        "number": p.number,
        "trial_id": p.trial_id,
        "values": {ax.objective.key: v for ax, v in zip(axes, p.values, strict=True)},
        "speculative": p.speculative,
        "params": p.params,
        "flags": p.flags,
    }


def pareto_document(analysis: StudyAnalysis) -> dict[str, Any]:
    front = analysis.pareto
    return {
        "schema_version": PARETO_SCHEMA_VERSION,
        "study": analysis.study_name,
        "engine_banner": analysis.banner,
        "study_objectives": front.study_objectives,
        "axes": [
            {
                "key": ax.objective.key,
                "metric": ax.objective.metric,
                "level": ax.level,
                "direction": ax.objective.direction,
            }
            for ax in front.axes
        ],
        "front": [_point(p, front.axes) for p in front.front],
        "dominated": [_point(p, front.axes) for p in front.dominated],
    }
