"""``export_study``: render every artifact first, write them into a folder beside ``best/`` (``.best.new``), then swap
it in with two renames, so ``best/`` is always one whole export. A kill in between leaves the staging folder, which
``half_export`` reports and the next export replaces."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autotune.core.secrets import REDACTED, has_secrets, redact_argv, redact_env, redact_flags
from autotune.export.analysis import analyze
from autotune.export.banner import engine_banner
from autotune.export.charts import pareto_svg, throughput_svg
from autotune.export.command import exported_server
from autotune.export.documents import best_document, pareto_document
from autotune.export.launch_script import render_launch_script, render_rehearsal_script
from autotune.export.machine_variation import coverage_lines, read_variation
from autotune.export.ray_llm import ray_llm_available, render_ray_llm_config
from autotune.export.rayservice import RAYSERVICE_YAML, render_rayservice
from autotune.export.report import PARETO_SVG, THROUGHPUT_SVG, render_report
from autotune.export.schedule import schedule_document
from autotune.export.serve_config import DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT, is_secret_var, render_serve_config
from autotune.finalists.outcome import FinalistOutcome
from autotune.space import Objective
from autotune.trial.records import TrialRecord

BEST_DIR = "best"
LAUNCH_SH = "launch.sh"
SERVE_CONFIG = "serve_config.yaml"
REHEARSE_SH = "rehearse_sim.sh"
REHEARSE_SERVE = "rehearse_sim_serve.yaml"
RAY_LLM = "ray_serve_llm.yaml"
RAYSERVICE = RAYSERVICE_YAML
SCRIPTS = (LAUNCH_SH, REHEARSE_SH)
BEST_JSON = "best.json"
PARETO_JSON = "pareto.json"
REPORT_MD = "report.md"
STAGING = ".best.new"  # the next export, being written
RETIRED = ".best.old"  # the previous export, between the two renames


def half_export(study_dir: Path) -> str:
    """What a cut-short export left (a kill or a full disk while writing it), or ``""``."""
    root = Path(study_dir)
    if (root / STAGING).exists() or (root / RETIRED).exists():
        whole = (
            "best/ holds the previous complete export"
            if (root / BEST_DIR / BEST_JSON).exists()
            else "there is no complete best/"
        )
        return (
            f"an export of {root} was cut short ({STAGING} or {RETIRED} is left); {whole}. Run `python -m "
            f"autotune.report {root}` (or resume the study) to export again."
        )
    return ""


SCHEDULE_JSON = "speculation_schedule.json"


@dataclass(frozen=True)
class ExportResult:
    best: TrialRecord | None  # None when no trial is feasible (see reason)
    reason: str
    decided_by: str  # "single_launch", "model_estimate", or the finalist stage's decision (BestChoice.method)
    best_dir: Path
    launch_script: Path | None  # written only when there is a best trial
    serve_config: Path | None
    rehearsal_script: Path | None  # simulated studies: the simulator as measured
    rehearsal_serve_config: Path | None
    ray_llm_config: Path | None  # Ray Serve LLM's SGLang server, where the installed Ray ships it
    rayservice: Path | None  # KubeRay's RayService running serve_config.yaml's app on Kubernetes
    best_json: Path
    pareto_json: Path
    report: Path
    throughput_svg: Path
    pareto_svg: Path
    verdict: Any = None  # the BaselineVerdict (autotune.export.verdict) the export opens with
    spread: Any = None  # the Spread: the recommendation against the worst complete config

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every file written, in a stable order."""
        maybe = (
            self.launch_script,
            self.serve_config,
            self.rehearsal_script,
            self.rehearsal_serve_config,
            self.ray_llm_config,
            self.rayservice,
        )
        fixed = (self.best_json, self.pareto_json, self.report, self.throughput_svg, self.pareto_svg)
        return tuple(p for p in maybe if p is not None) + fixed


def export_study(
    study_dir: Path,
    *,
    study_name: str,
    objectives: Sequence[Objective],
    records: Sequence[TrialRecord],
    load_levels: Sequence[int],
    study_only: Mapping[str, str] | None = None,
    finalists: FinalistOutcome | None = None,
    note: str = "",
    stopped_early: str = "",
    baseline: Mapping[str, Any] | None = None,
    http: tuple[str, int] | None = None,
    estimates: Mapping[int, float] | None = None,
) -> ExportResult:
    """Write ``study_dir/best/``: launch.sh, serve_config.yaml, rayservice.yaml (KubeRay), best.json, pareto.json,
    report.md and two SVGs; for a
    simulated study also rehearse_sim.sh and rehearse_sim_serve.yaml (the simulator as measured).

    ``study_only``: the study's benchmark-only settings (``server.study_only``: name -> reason), left out of launch.sh
    and serve_config.yaml with the known ones (``autotune.export.study_only``).
    With no feasible trial, best.json says why and the scripts and Serve configs are not written (stale ones removed).
    ``note``: a banner for report.md and best.json (e.g. that the study was interrupted and these results are partial).
    ``http``: the (host, port) Serve's HTTP proxy binds in the exported Serve configs (the study's ``export``
    section; default 127.0.0.1:8000).
    ``estimates``: a model's estimate of the primary objective per trial (``autotune.study.model_rank``); where no
    finalist stage decided, the best is the feasible trial with the best estimate.
    Raises ExportError (an AutotuneError) for bad objectives or load levels, before anything is written.
    """
    host, port = http if http is not None else (DEFAULT_HTTP_HOST, DEFAULT_HTTP_PORT)
    # a record written before redaction existed (or before it knew a credential's shape)
    records = [
        replace(
            r,
            env=redact_env(r.env),
            flags=redact_flags(r.flags),
            argv=redact_argv(r.argv),
            launch=r.launch.redacted() if r.launch is not None else None,
        )
        for r in records
    ]
    a = analyze(
        study_name=study_name,
        objectives=objectives,
        records=records,
        load_levels=load_levels,
        finalists=finalists,
        stopped_early=stopped_early,
        baseline=baseline,
        estimates=estimates,
        study_only=study_only,
    )
    best = a.best.record
    server = exported_server(best, study_only) if best is not None else None
    texts: dict[str, str] = {
        BEST_JSON: json.dumps(best_document(a, server), indent=2) + "\n",
        PARETO_JSON: json.dumps(pareto_document(a), indent=2) + "\n",
        REPORT_MD: render_report(a, server),
        THROUGHPUT_SVG: throughput_svg(a),
        PARETO_SVG: pareto_svg(a),
    }
    variation = read_variation(Path(study_dir))
    texts[REPORT_MD] = _insert_before(
        texts[REPORT_MD], "## Per-traffic-regime recommendation", "\n".join(coverage_lines(variation)) + "\n"
    )
    if variation is not None:
        doc = json.loads(texts[BEST_JSON])
        doc["between_machine_variation"] = {
            "source": variation.source,
            "engine": variation.engine,
            "rows": [list(r) for r in variation.rows],
        }
        texts[BEST_JSON] = json.dumps(doc, indent=2) + "\n"
    if a.schedule is not None:
        texts[SCHEDULE_JSON] = json.dumps(schedule_document(a.schedule), indent=2) + "\n"
    if note:
        texts[REPORT_MD] = f"> **{note}**\n\n" + texts[REPORT_MD]
        texts[BEST_JSON] = json.dumps({"note": note, **json.loads(texts[BEST_JSON])}, indent=2) + "\n"
    if best is not None and server is not None:
        levels = a.load_levels
        texts[LAUNCH_SH] = render_launch_script(best, study_name=study_name, load_levels=levels, server=server)
        texts[SERVE_CONFIG] = render_serve_config(
            best, study_name=study_name, server=server, http_host=host, http_port=port
        )
        header = [
            f"# autotune best configuration: study {' '.join(study_name.split())}, trial {best.number}",
            f"# {engine_banner(best.engine, best.env)}",
        ]
        secret = tuple(k for k, v in server.production.env if is_secret_var(k, v))
        texts[RAYSERVICE] = render_rayservice(
            best, server.production, study_name=study_name, header=header, secret_env=secret
        )
        if ray_llm_available():
            texts[RAY_LLM] = render_ray_llm_config(server.production, study_name=study_name, header=header)
        if server.rehearsal is not None:
            texts[REHEARSE_SH] = render_rehearsal_script(best, study_name=study_name, load_levels=levels, server=server)
            texts[REHEARSE_SERVE] = render_serve_config(
                best, study_name=study_name, server=server, rehearsal=True, http_host=host, http_port=port
            )
    out = Path(study_dir) / BEST_DIR
    # an export that names secret variables is kept from other users (the values themselves are never written)
    private = any(has_secrets(r.env) or has_secrets(r.flags) or REDACTED in r.argv for r in records)
    _swap_in(Path(study_dir), texts, private=private)
    return ExportResult(
        best=best,
        reason=a.best.reason,
        decided_by=a.best.method,
        best_dir=out,
        launch_script=out / LAUNCH_SH if best is not None else None,
        serve_config=out / SERVE_CONFIG if best is not None else None,
        rehearsal_script=out / REHEARSE_SH if REHEARSE_SH in texts else None,
        rehearsal_serve_config=out / REHEARSE_SERVE if REHEARSE_SERVE in texts else None,
        ray_llm_config=out / RAY_LLM if RAY_LLM in texts else None,
        rayservice=out / RAYSERVICE if RAYSERVICE in texts else None,
        best_json=out / BEST_JSON,
        pareto_json=out / PARETO_JSON,
        report=out / REPORT_MD,
        throughput_svg=out / THROUGHPUT_SVG,
        pareto_svg=out / PARETO_SVG,
        verdict=a.verdict,
        spread=a.spread,
    )


def _swap_in(study_dir: Path, texts: Mapping[str, str], *, private: bool) -> None:
    """Write ``texts`` into ``.best.new`` (files of ``best/`` that the export does not write, e.g. report.html, are
    carried over), then rename ``best`` -> ``.best.old``, ``.best.new`` -> ``best``, and remove ``.best.old``."""
    out, staging, retired = study_dir / BEST_DIR, study_dir / STAGING, study_dir / RETIRED
    shutil.rmtree(staging, ignore_errors=True)  # a cut-short export's leftovers
    if retired.exists() and not out.exists():
        retired.rename(out)  # cut short between the two renames: the previous export is the whole one
    shutil.rmtree(retired, ignore_errors=True)
    staging.mkdir(mode=0o700 if private else 0o755, parents=True)
    managed = {LAUNCH_SH, SERVE_CONFIG, REHEARSE_SH, REHEARSE_SERVE, RAY_LLM, RAYSERVICE, *texts}
    if out.is_dir():
        for old in out.iterdir():
            if old.is_file() and not old.name.startswith(".") and old.name not in managed:
                shutil.copy2(old, staging / old.name)
    for name, text in texts.items():
        mode = 0o755 if name in SCRIPTS else 0o644
        _write_atomic(staging / name, text, mode=mode & 0o700 if private else mode)
    if private:
        os.chmod(staging, 0o700)
    if out.exists():
        out.rename(retired)
    staging.rename(out)
    shutil.rmtree(retired, ignore_errors=True)


def _insert_before(text: str, heading: str, section: str) -> str:
    at = text.find(heading)
    return text[:at] + section + "\n" + text[at:] if at >= 0 else text + "\n" + section


def _write_atomic(path: Path, text: str, *, mode: int) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
