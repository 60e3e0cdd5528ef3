"""``launch.sh`` (the production SGLang command) and ``rehearse_sim.sh`` (the simulator as measured). Pure text.

Both scripts are portable: ``${PYTHON:-python3}``, ``--host ${HOST:-127.0.0.1}``, ``--port ${PORT:-30000}``; the
variables the server was measured without are removed with ``env -u``; ``--dry-run`` prints the environment and the
command; arguments after ``--`` are appended to the command (e.g. ``-- --api-key KEY``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from autotune.core.secrets import REDACTED, is_secret
from autotune.export.accessors import fmt, level_label, throughput, tpot_median, ttft_p99
from autotune.export.banner import engine_banner
from autotune.export.command import (
    DEFAULT_PORT,
    SGLANG_MODULE,
    ExportedServer,
    Option,
    ServerCommand,
    exported_server,
)
from autotune.export.errors import ExportError
from autotune.export.study_only import StudyOnly
from autotune.trial.records import TrialRecord

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_launch_script(
    record: TrialRecord,
    *,
    study_name: str,
    load_levels: Sequence[int],
    server: ExportedServer | None = None,
) -> str:
    """``launch.sh``: the SGLang command the trial stands for, without benchmark-only settings."""
    server = exported_server(record) if server is None else server
    simulated = server.rehearsal is not None
    lines = _common_header(record, study_name, load_levels)
    if simulated:
        lines += [
            "#",
            "# TUNED ON THE SIMULATOR: the figures above are simulated, not measured. This is the SGLang command the",
            "# tuned configuration stands for (model path and fixed flags from the study). Measure it on your GPUs",
            "# before relying on it: python -m autotune.verify <results/study> (rehearse_sim.sh runs the simulator).",
            *_simulated_model(record),
        ]
    lines += _removed_lines(server.removed)
    return _script(record, lines, server.production, what="SGLang server")


def _simulated_model(record: TrialRecord) -> list[str]:
    """The model the simulator profile stands for, beside the model path the command names."""
    profile = record.engine.profile if record.engine is not None else None
    if not profile:
        return []
    try:
        from autotune.sim.profile import load_profile

        model = load_profile(profile).model.name
    except Exception:  # noqa: BLE001 - a profile since removed: the header only names what it can
        return []
    path = record.launch.option("model-path") if record.launch is not None else None
    same = path is not None and path.rstrip("/").rsplit("/", 1)[-1].lower() in model.lower()
    tail = "" if same else f"; the command names --model-path {path}: point it at that model's weights"
    return [f"# Simulated model: {model} (profile {profile}){tail}."]


def render_rehearsal_script(
    record: TrialRecord, *, study_name: str, load_levels: Sequence[int], server: ExportedServer
) -> str:
    """``rehearse_sim.sh``: the simulated server exactly as the study measured it (benchmark-only settings included)."""
    if server.rehearsal is None:
        raise ExportError(f"trial {record.number} did not run on the simulator: there is nothing to rehearse")
    lines = _common_header(record, study_name, load_levels)
    lines += [
        "#",
        "# REHEARSAL: starts autotune's SIMULATED SGLang server exactly as the study measured it (for CPU machines and",
        "# for python -m autotune.verify). It is not SGLang; launch.sh is the real command.",
    ]
    return _script(record, lines, server.rehearsal, what="simulated server")


def _common_header(record: TrialRecord, study_name: str, load_levels: Sequence[int]) -> list[str]:
    return [
        f"autotune best configuration: study {_one_line(study_name)}, trial {record.number} (id {record.trial_id})",
        engine_banner(record.engine, record.env),
        *(_one_line(line) for line in _metric_lines(record, load_levels)),
    ]


def _removed_lines(removed: Sequence[StudyOnly]) -> list[str]:
    if not removed:
        return []
    out = ["#", "# Measured with these benchmark-only settings, left out here (remove or re-measure on real weights):"]
    out += [f"#   {_one_line(s.text)}: {_one_line(s.reason)}" for s in removed]
    flags = [s for s in removed if s.kind == "flag"]
    env = [s for s in removed if s.kind == "env"]
    # NAME=value with only the value quoted (a quoted 'NAME=value' is a command name to bash, not an assignment)
    how = " ".join(f"{s.name}={_comment_word(s.value or '')}" for s in env)
    args = " ".join(
        _comment_word(t) for s in flags for t in (f"--{s.name}", *([s.value] if s.value is not None else []))
    )
    out.append(f"# To run exactly as measured: {how + ' ' if how else ''}bash launch.sh{' -- ' + args if args else ''}")
    return out


def _script(record: TrialRecord, header: list[str], cmd: ServerCommand, *, what: str) -> str:
    names = [k for k, _ in (*cmd.env, *cmd.site_env)] + list(cmd.unset_env)
    bad = [k for k in names if not _ENV_NAME.match(k)]
    if bad:
        raise ExportError(f"trial {record.number}: environment names {bad!r} are not valid shell variable names")
    env_lines = [_export_line(k, v) for k, v in cmd.env]
    site_lines = [f"export {k}={shlex.quote(v)}" for k, v in cmd.site_env]
    exported = " ".join(k for k, _ in (*cmd.env, *cmd.site_env))
    top = [
        "#!/usr/bin/env bash",
        *(f"# {line}" if not line.startswith("#") else line for line in header),
        "#",
        f"# Host and port: {_host_note(cmd.host)} HOST and PORT override them (default port {DEFAULT_PORT}).",
        "# Serve other machines only behind a firewall or an authenticating proxy (or pass -- --api-key KEY).",
        "#",
        f"# Usage: ./{'launch.sh' if cmd.module == SGLANG_MODULE else 'rehearse_sim.sh'} [--dry-run] [-- EXTRA ARGS]",
        f"#   runs the {what} with ${{PYTHON:-python3}} (exec: signals reach it directly); --dry-run (or DRY_RUN=1)",
        "#   prints the environment and the command without running anything; EXTRA ARGS are appended to the command.",
        *_multinode_lines(cmd.nnodes),
    ]
    body = [
        "set -euo pipefail",
        "",
        'DRY_RUN="${DRY_RUN:-0}"',
        "EXTRA=()",
        "while [[ $# -gt 0 ]]; do",
        '  case "$1" in',
        "    --dry-run|-n) DRY_RUN=1 ;;",
        "    -h|--help) sed -n '2,/^set -euo/p' \"$0\" | sed '$d'; exit 0 ;;",
        '    --) shift; EXTRA=("$@"); break ;;',
        '    *) echo "$(basename "$0"): unknown argument: $1 (use --dry-run, or -- before server arguments)" >&2; exit 2 ;;',
        "  esac",
        "  shift",
        "done",
        "",
        "# The environment the server was measured with (a secret is read from your environment, never stored).",
        *(env_lines or ["# (autotune set no variable for this server)"]),
    ]
    if site_lines:
        body += [
            "# NVLink multicast was switched off where it was measured (the site's policy, autotune.core.site, or the",
            "# study's own setting). Keep these where your site needs multicast off.",
            *site_lines,
        ]
    body += [
        f"ENV_NAMES=({exported})",
        "# Inherited variables the measured server did not have (Ray sets OMP_NUM_THREADS in its workers).",
        f"UNSET_ENV=({' '.join(cmd.unset_env)})",
        "",
        "CMD=(",
        f'  "${{PYTHON:-python3}}" -m {cmd.module}',
        *(f"  {line}" for line in _option_lines(cmd.options)),
        f'  --host "${{HOST:-{cmd.host}}}"',
        f'  --port "${{PORT:-{DEFAULT_PORT}}}"',
        *(_RANK_OPTIONS if cmd.nnodes > 1 else []),
        ")",
        'CMD+=(${EXTRA[@]+"${EXTRA[@]}"})',
        "RUN=(env)",
        'for name in ${UNSET_ENV[@]+"${UNSET_ENV[@]}"}; do RUN+=(-u "$name"); done',
        "",
        'if [[ "$DRY_RUN" != "0" ]]; then',
        '  echo "# dry run: nothing started"',
        '  for name in ${ENV_NAMES[@]+"${ENV_NAMES[@]}"}; do printf \'export %s=%q\\n\' "$name" "${!name}"; done',
        '  printf \'%q \' "${RUN[@]}" "${CMD[@]}"',
        "  echo",
        "  exit 0",
        "fi",
        "",
        'exec "${RUN[@]}" "${CMD[@]}"',
    ]
    return "\n".join(top + [""] + body) + "\n"


_RANK_OPTIONS = [
    '  --node-rank "${NODE_RANK:?set NODE_RANK to the rank of this node: 0 on the node that serves HTTP, 1.. on the others}"',
    '  --dist-init-addr "${DIST_INIT_ADDR:?set DIST_INIT_ADDR to the address of node rank 0 and a free port, e.g. 10.0.0.1:50000}"',
]


def _multinode_lines(nnodes: int) -> list[str]:
    """How to start a server that spans ``nnodes`` nodes: the same script on each, with its own node rank."""
    if nnodes <= 1:
        return []
    return [
        "#",
        f"# MULTI-NODE: this server spans {nnodes} nodes (--nnodes {nnodes}). Run this script on each of them with the",
        "# same DIST_INIT_ADDR (node rank 0's address and a free port, reachable from the others) and that node's",
        f"# NODE_RANK: 0 on the node that serves HTTP, {'1' if nnodes == 2 else f'1 to {nnodes - 1}'} on the "
        f"other{'s' if nnodes > 2 else ''}, e.g.",
        "#   NODE_RANK=0 DIST_INIT_ADDR=10.0.0.1:50000 ./launch.sh     # on 10.0.0.1",
        "#   NODE_RANK=1 DIST_INIT_ADDR=10.0.0.1:50000 ./launch.sh     # on the next node",
    ]


def _metric_lines(record: TrialRecord, load_levels: Sequence[int]) -> list[str]:
    lines = []
    if record.objectives:
        lines.append("Objectives: " + ", ".join(f"{k} = {v:.4g}" for k, v in record.objectives.items()))
    if record.params:
        lines.append("Params: " + ", ".join(f"{k}={v}" for k, v in record.params.items() if v is not None))
    open_loop = [lv.key for lv in record.bench.levels if lv.load] if record.bench is not None else []
    for c in [*sorted(load_levels), *open_loop]:
        tput = throughput(record, c)
        if tput is None:
            continue
        lines.append(
            f"{f'Concurrency {c}' if isinstance(c, int) else level_label(c)}: {fmt(tput, thousands=True)} output "
            f"tok/s, TTFT p99 {fmt(ttft_p99(record, c))} ms, TPOT median {fmt(tpot_median(record, c), 2)} ms"
        )
    return lines


def _export_line(name: str, value: str) -> str:
    if value == REDACTED or is_secret(name, value=value):
        return f'export {name}="${{{name}:?set {name} in your environment: autotune does not store secret values}}"'
    return f"export {name}={shlex.quote(value)}"


def _comment_word(value: str) -> str:
    """``value`` as one shell word that fits on a comment line: shell-quoted, or ``$'...'`` where it holds a newline or
    another control character (a newline would end the comment and run the rest as a command)."""
    if value.isprintable():
        return shlex.quote(value)
    escaped = "".join(
        "\\" + c if c in "\\'" else c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\U{ord(c):08x}"
        for c in value
    )
    return f"$'{escaped}'"


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _host_note(host: str) -> str:
    if host in ("localhost", "::1") or host.startswith("127."):
        return f"the server binds to {host} (loopback): only this machine can reach it."
    return f"the server binds to {host}: every machine that can reach that address can use it."


def _option_lines(options: Sequence[Option]) -> list[str]:
    """Shell-quoted options, one per line with its value (``--tp-size 8``), for a readable array literal."""
    return [
        shlex.quote(f"--{name}") + (f" {_option_value(name, value)}" if value is not None else "")
        for name, value in options
    ]


def secret_flag_variable(name: str) -> str:
    """The variable launch.sh reads a secret flag's value from: ``--api-key`` -> ``API_KEY``."""
    return re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()


def _option_value(name: str, value: str) -> str:
    if value != REDACTED:
        return shlex.quote(value)
    var = secret_flag_variable(name)
    return f'"${{{var}:?set {var} in your environment to the value of --{name}: autotune does not store secrets}}"'
