"""The engine contract: how a TrialConfig becomes a running server, and how its log is read.

An engine adapter is pure on the driver side (``launch_spec`` probes nothing) and does its probing on the worker
(``preflight`` runs the installed release's ``--help``). Implementations: ``sglang.SGLangEngine`` (real SGLang) and
``sim.SimEngine`` (the simulated server, same flags, same endpoints, same log lines).
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

from autotune.core.failures import FailureKind, PhaseTimings
from autotune.core.site import SitePolicy, check_study_env, site_policy
from autotune.core.trial import FlagValue, LaunchSpec, TrialConfig
from autotune.engines import sglang_rules
from autotune.engines.sglang_facts import ARGPARSE_ARGUMENT, ARGPARSE_UNRECOGNIZED, FAILURE_PATTERNS, LOG_PATTERNS

# Ray sets these in every actor (OMP_NUM_THREADS = the actor's CPUs). A server started by hand has none of them, so the
# launcher removes them unless the study sets them explicitly: tuning results must describe the server you will deploy.
RAY_INJECTED_ENV: tuple[str, ...] = ("OMP_NUM_THREADS",)


def server_env(cfg_env: Mapping[str, str], policy: SitePolicy | None = None) -> dict[str, str]:
    """The variables autotune sets for a server: the trial's own, then the site's (``autotune.core.site``), which win.

    Where the site sets no multicast variable, nothing is added. Raises SiteError when the trial overrides one.
    """
    policy = site_policy() if policy is None else policy
    check_study_env(cfg_env, policy)
    env = dict(cfg_env)
    env.update(policy.env)
    return env


def flags_to_argv(flags: Mapping[str, FlagValue | None]) -> list[str]:
    """``{"tp-size": 2, "disable-custom-all-reduce": True, "x": None}`` -> ``["--tp-size", "2", "--disable-custom-all-reduce"]``."""
    argv: list[str] = []
    for name, value in flags.items():
        if value is None or value is False:
            continue
        argv.append(f"--{name}")
        if value is not True:
            argv.append(str(value))
    return argv


def parse_log_phases(text: str) -> PhaseTimings:
    """Launch phases from an SGLang (or simulated) server log. Draft-model lines add to the weight/graph totals."""

    def total(key: str) -> float | None:
        vals = [float(m) for m in LOG_PATTERNS[key].findall(text)]
        return round(sum(vals), 3) if vals else None

    def first_int(key: str) -> int | None:
        m = LOG_PATTERNS[key].search(text)
        return int(m.group(1)) if m else None

    return PhaseTimings(
        weights_loaded_s=total("weights"),
        kv_cache_tokens=first_int("kv_tokens"),
        graph_capture_s=total("graph"),
        max_total_num_tokens=first_int("max_total"),
        max_running_requests=first_int("max_running"),
    )


_ERROR_LINE = re.compile(r"\b\w*(Error|Exception)\b: |NCCL WARN|error: ")


def key_error_line(log_tail: str, max_chars: int = 300) -> str:
    """The line of a dead server's log that says why: its last ``XxxError: ...`` line, else its last non-empty line."""
    lines = [ln.strip() for ln in log_tail.splitlines() if ln.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.search(line):
            return line[:max_chars]
    return lines[-1][:max_chars] if lines else ""


def rejected_flags_in_log(log_tail: str) -> tuple[str, ...]:
    """The flags (without dashes) that the server's argparse rejected, as its error lines name them."""
    names = ARGPARSE_ARGUMENT.findall(log_tail)
    for listed in ARGPARSE_UNRECOGNIZED.findall(log_tail):
        names += [tok[2:].split("=", 1)[0] for tok in listed.split() if tok.startswith("--")]
    return tuple(dict.fromkeys(names))


def classify_failure(log_tail: str, *, ready: bool) -> FailureKind:
    """Map a dead server's log tail to a failure kind. ``ready`` says whether it had become ready before dying."""
    for kind, pattern in FAILURE_PATTERNS:
        if pattern.search(log_tail):
            return kind
    return FailureKind.CRASHED_UNDER_LOAD if ready else FailureKind.CRASHED_AT_LAUNCH


_HELP_FLAG = re.compile(r"(?<![\w-])--([a-z0-9][a-z0-9-_]*)")


def flags_in_help(help_text: str) -> frozenset[str]:
    """Every ``--flag`` named in an argparse ``--help`` text."""
    return frozenset(_HELP_FLAG.findall(help_text))


class Engine(abc.ABC):
    """Turns a TrialConfig into a LaunchSpec and checks it on the worker. Both engines print SGLang's log lines, which
    ``parse_log_phases`` and ``classify_failure`` read.

    Ownership: the engine never starts or stops processes (``autotune.trial.launcher`` does). ``launch_spec`` is pure;
    ``preflight`` may run subprocesses on the worker that will launch the server.
    """

    name: str
    simulated: bool
    cache_help: bool = True  # SGLang's --help costs 20-40 s; the simulator's is cheap and changes with the code

    @abc.abstractmethod
    def command(self) -> tuple[str, ...]:
        """What runs a server, before its flags: ``(python, "-m", "sglang.launch_server")``."""

    def normalize(self, cfg: TrialConfig) -> TrialConfig:
        """The configuration as the server will run it: what SGLang changes silently applied (the simulator takes the
        same flags and makes the same changes), so a trial's recorded flags are what ran."""
        return replace(cfg, flags=sglang_rules.normalize(cfg.flags))

    def launch_spec(
        self,
        cfg: TrialConfig,
        *,
        port: int,
        nccl_port: int | None = None,
        ready_timeout_s: float = 900.0,
        site: SitePolicy | None = None,
    ) -> LaunchSpec:
        """The exact argv and environment for one server: the same for both engines but for ``command``.

        ``site``: the site policy whose variables every server keeps (default: read from this process's environment).
        """
        flags: dict[str, FlagValue | None] = {"model-path": cfg.model_path, "tp-size": cfg.tp_size}
        flags.update(cfg.flags)
        if cfg.nnodes > 1:  # the replica sets each rank's --node-rank and --dist-init-addr (autotune.serve.ranks)
            flags["nnodes"] = cfg.nnodes
        flags.update({"host": cfg.host, "port": port})
        if nccl_port is not None:
            flags["nccl-port"] = nccl_port
        return LaunchSpec(
            engine=self.name,
            argv=(*self.command(), *flags_to_argv(flags)),
            env=server_env(cfg.env, site),
            host=cfg.host,
            port=port,
            gpus=cfg.gpus,
            unset_env=tuple(v for v in RAY_INJECTED_ENV if v not in cfg.env),
            ready_timeout_s=ready_timeout_s,
            nnodes=cfg.nnodes,
        )

    @abc.abstractmethod
    def help_text(self, python: str) -> str:
        """The installed release's ``--help`` output (cached by the caller)."""

    @abc.abstractmethod
    def release(self) -> str:
        """The installed release, e.g. ``"sglang 0.5.17"``; read without importing the engine."""

    # Release-dependent renames: (what the study says, what an older/newer release calls it).
    FLAG_ALIASES: Sequence[tuple[str, str]] = ()
