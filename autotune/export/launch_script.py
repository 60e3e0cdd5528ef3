"""``launch.sh``: the exact server command and environment of one trial, with a dry-run mode. Pure text."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from autotune.export.banner import engine_banner
from autotune.export.errors import ExportError
from autotune.export.metrics import argv_value, fmt, throughput, tpot_median, ttft_p99
from autotune.records import TrialRecord
from autotune.secrets import REDACTED, is_secret

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def render_launch_script(record: TrialRecord, *, study_name: str, load_levels: Sequence[int]) -> str:
    """A bash script that exports ``record.env`` and execs ``record.argv``; ``--dry-run`` / ``DRY_RUN=1`` only prints."""
    if not record.argv:
        raise ExportError(f"trial {record.number} has no argv: nothing to launch (was the record written by a runner?)")
    bad = [k for k in record.env if not _ENV_NAME.match(k)]
    if bad:
        raise ExportError(f"trial {record.number}: environment names {bad!r} are not valid shell variable names")
    host = argv_value(record.argv, "host")
    header = [
        "#!/usr/bin/env bash",
        f"# autotune best configuration: study {_one_line(study_name)}, trial {record.number} (id {record.trial_id})",
        f"# {engine_banner(record.engine)}",
        *(f"# {_one_line(line)}" for line in _metric_lines(record, load_levels)),
        "#",
        f"# Host: {_host_note(host)}",
        "# To serve other machines, change the value after --host (e.g. to this node's address) only behind a",
        "# firewall or an authenticating proxy: the SGLang HTTP server has no authentication.",
        "#",
        "# Usage: ./launch.sh            run the server (exec: signals reach it directly)",
        "#        ./launch.sh --dry-run  print the environment and the command without running anything",
        "#        DRY_RUN=1 ./launch.sh  same as --dry-run",
    ]
    env_names = " ".join(record.env)
    body = [
        "set -euo pipefail",
        "",
        'DRY_RUN="${DRY_RUN:-0}"',
        'for arg in "$@"; do',
        '  case "$arg" in',
        "    --dry-run|-n) DRY_RUN=1 ;;",
        "    -h|--help) sed -n '2,/^set -euo/p' \"$0\" | sed '$d'; exit 0 ;;",
        '    *) echo "launch.sh: unknown argument: $arg (use --dry-run to print the command)" >&2; exit 2 ;;',
        "  esac",
        "done",
        "",
        "# Environment autotune set for this trial (exact values; a secret is read from your environment, never stored).",
        *(_export_line(k, v) for k, v in record.env.items()),
        f"AUTOTUNE_ENV_NAMES=({env_names})",
        "",
        "# The exact server command.",
        "CMD=(",
        *(f"  {line}" for line in _argv_lines(record.argv)),
        ")",
        "",
        'if [[ "$DRY_RUN" != "0" ]]; then',
        '  echo "# dry run: nothing started"',
        '  for name in ${AUTOTUNE_ENV_NAMES[@]+"${AUTOTUNE_ENV_NAMES[@]}"}; do printf \'export %s=%q\\n\' "$name" "${!name}"; done',
        "  printf '%q ' \"${CMD[@]}\"",
        "  echo",
        "  exit 0",
        "fi",
        "",
        'exec "${CMD[@]}"',
    ]
    return "\n".join(header + [""] + body) + "\n"


def _metric_lines(record: TrialRecord, load_levels: Sequence[int]) -> list[str]:
    lines = []
    if record.objectives:
        lines.append("Objectives: " + ", ".join(f"{k} = {v:.4g}" for k, v in record.objectives.items()))
    if record.params:
        lines.append("Params: " + ", ".join(f"{k}={v}" for k, v in record.params.items() if v is not None))
    for c in sorted(load_levels):
        tput = throughput(record, c)
        if tput is None:
            continue
        lines.append(
            f"Concurrency {c}: {fmt(tput, thousands=True)} output tok/s, TTFT p99 {fmt(ttft_p99(record, c))} ms, "
            f"TPOT median {fmt(tpot_median(record, c), 2)} ms"
        )
    return lines


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _host_note(host: str | None) -> str:
    if host is None:
        return "no --host in the command, so the engine's default applies (SGLang: 127.0.0.1)."
    if host in ("localhost", "::1") or host.startswith("127."):
        return f"the server binds to {host} (loopback): only this machine can reach it."
    return f"the server binds to {host}: every machine that can reach that address can use it."


def _argv_lines(argv: Sequence[str]) -> list[str]:
    """Shell-quoted argv, one option per line with its value (``--tp-size 8``), for a readable array literal."""
    lines: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        takes_value = arg.startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("--")
        if takes_value and i > 0:
            lines.append(f"{shlex.quote(arg)} {shlex.quote(argv[i + 1])}")
            i += 2
        else:
            lines.append(shlex.quote(arg))
            i += 1
    return lines


def _export_line(name: str, value: str) -> str:
    if value == REDACTED or is_secret(name):
        return f'export {name}="${{{name}:?set {name} in your environment: autotune does not store secret values}}"'
    return f"export {name}={shlex.quote(value)}"
