"""The server a trial stands for, as the export runs it: the production SGLang command and, for a simulated study, the
simulator rehearsal. Pure: built from a TrialRecord's typed launch (``record.launch``) and environment.

The production command is portable: no interpreter path (the scripts use ``${PYTHON:-python3}``), no host or port
(``${HOST}``, ``${PORT}``), no port SGLang picks itself (``--nccl-port``), no simulator option, and no benchmark-only
setting (``autotune.export.study_only``). What was removed is kept in ``removed``, with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autotune.core.secrets import REDACTED
from autotune.core.site import MULTICAST_VARS
from autotune.engines.base import RAY_INJECTED_ENV
from autotune.export.errors import ExportError
from autotune.export.study_only import StudyOnly, study_only_settings
from autotune.trial.launched import Option
from autotune.trial.records import TrialRecord

SGLANG_MODULE = "sglang.launch_server"
SIM_MODULE = "autotune.sim.server"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 30000
# Options the export writes itself (host, port; a multi-node server's node rank and rank 0's address, which differ per
# node and per deployment) or leaves to the server (the NCCL port it picks when unset).
MANAGED_OPTIONS = frozenset({"host", "port", "nccl-port", "node-rank", "dist-init-addr"})
SIM_OPTION_PREFIX = "sim-"


@dataclass(frozen=True)
class ServerCommand:
    """``python -m <module> <options> --host H --port P`` with ``env`` set and ``unset_env`` removed."""

    module: str
    options: tuple[Option, ...]
    env: tuple[tuple[str, str], ...]  # the study's variables
    site_env: tuple[tuple[str, str], ...]  # the site's multicast variables the trial ran with (autotune.core.site)
    unset_env: tuple[str, ...]
    host: str
    nnodes: int = 1  # nodes the server spans (``--nnodes``): every node runs the command with its own node rank

    @property
    def secret_flags(self) -> tuple[str, ...]:
        """The flags whose values are secrets, not stored (the record redacted them): the exports leave them out and
        say where to add them."""
        return tuple(name for name, value in self.options if value == REDACTED)


@dataclass(frozen=True)
class ExportedServer:
    production: ServerCommand  # always SGLang
    rehearsal: ServerCommand | None  # the simulator exactly as measured (simulated studies only)
    removed: tuple[StudyOnly, ...]  # benchmark-only settings left out of production


def measured_unset_env(record: TrialRecord) -> tuple[str, ...]:
    """Inherited variables the trial's server ran without: the record's ``unset_env``, else (a record written before
    it was kept) what the launcher removes by rule: Ray's variables the study did not set."""
    if record.unset_env:
        return tuple(record.unset_env)
    return tuple(v for v in RAY_INJECTED_ENV if v not in record.env)


def exported_server(record: TrialRecord, study_only: Mapping[str, str] | None = None) -> ExportedServer:
    """The production command (and the rehearsal, for a simulated trial) of one trial."""
    launch = record.launch
    if launch is None:
        if not record.argv:
            raise ExportError(
                f"trial {record.number} has no argv: nothing to launch (was the record written by a runner?)"
            )
        raise ExportError(
            f"trial {record.number}: its argv does not run a Python module with --options, so there is no launch to "
            f"export: {list(record.argv)!r}"
        )
    module, options = launch.module, launch.options
    if module not in (SGLANG_MODULE, SIM_MODULE):
        raise ExportError(f"trial {record.number} ran {module!r}, neither SGLang nor the simulator: cannot export it")
    host = next((v for k, v in options if k == "host" and v), DEFAULT_HOST)
    server_opts = tuple((k, v) for k, v in options if k not in MANAGED_OPTIONS)
    engine_opts = tuple((k, v) for k, v in server_opts if not k.startswith(SIM_OPTION_PREFIX))
    # the multicast variables at their "off" values (the site's policy, or a study that searched NCCL_NVLS_ENABLE and
    # kept 0); a searched NCCL_NVLS_ENABLE=1 is an ordinary tuned variable
    off = {k for k, v in record.env.items() if MULTICAST_VARS.get(k) == v}
    site_env = tuple((k, v) for k, v in record.env.items() if k in off)
    study_env = {k: v for k, v in record.env.items() if k not in off}
    removed = study_only_settings(dict(engine_opts), study_env, study_only or {})
    gone_flags = {s.name for s in removed if s.kind == "flag"}
    gone_env = {s.name for s in removed if s.kind == "env"}
    unset = measured_unset_env(record)
    nnodes = int(launch.option("nnodes") or 1)
    production = ServerCommand(
        module=SGLANG_MODULE,
        options=tuple((k, v) for k, v in engine_opts if k not in gone_flags),
        env=tuple((k, v) for k, v in study_env.items() if k not in gone_env),
        site_env=site_env,
        unset_env=unset,
        host=host,
        nnodes=nnodes,
    )
    rehearsal = None
    if module == SIM_MODULE:
        rehearsal = ServerCommand(
            module=SIM_MODULE,
            options=server_opts,
            env=tuple(study_env.items()),
            site_env=site_env,
            unset_env=unset,
            host=host,
            nnodes=nnodes,
        )
    return ExportedServer(production=production, rehearsal=rehearsal, removed=removed)


def option_argv(options: Sequence[Option]) -> list[str]:
    out: list[str] = []
    for name, value in options:
        out.append(f"--{name}")
        if value is not None:
            out.append(value)
    return out
