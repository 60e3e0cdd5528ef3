"""The engine contract: how a TrialConfig becomes a running server, how its log is read, and what its flags mean.

An engine adapter is pure on the driver side (``launch_spec`` probes nothing) and does its probing on the worker
(``preflight`` runs the installed release's ``--help``). Implementations, registered by import path in
``autotune.engines``: ``sglang.SGLangEngine`` (real SGLang) and ``autotune.sim.adapter.SimEngine`` (the simulated
server, same flags, same endpoints, same log lines). ``tests/engines/test_contract.py`` is what every registered
engine must pass.

The search policy reads an engine through its ``EngineModel`` (``Engine.model``): the validity rules, the running
cap, the memory fraction, the KV bytes a token takes, the drafter, and the flag names a study's parameters are matched
against. Policy code never spells an engine's flags itself.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from autotune.core.failures import FailureKind, PhaseTimings
from autotune.core.site import SitePolicy, check_study_env, site_policy
from autotune.core.trial import FlagValue, LaunchSpec, TrialConfig
from autotune.engines.memory import Sizes
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


class EngineModel(abc.ABC):
    """What the search policy knows of an engine before launching it, read from a trial's flags (keyed without
    dashes, as in ``TrialConfig.flags``) and environment. Pure; one instance per engine family (``Engine.model``).

    The flag names are what a study's parameters are matched against (``ParamSpec.flag``): the policy lifts the
    running cap, raises the memory fraction and tells drafters apart through them.
    """

    name: ClassVar[str]  # the engine family as users know it ("SGLang"), for messages
    running_cap_flag: ClassVar[str]  # the running-request limit
    memory_fraction_flag: ClassVar[str]  # the share of GPU memory for weights and KV cache
    drafter_flag: ClassVar[str]  # the draft model of speculative decoding
    graph_ceiling_flags: ClassVar[tuple[str, ...]]  # the decode CUDA-graph batch ceiling, every spelling

    # ---- validity (before a launch) -------------------------------------------------------------------------------
    @abc.abstractmethod
    def normalize(self, flags: Mapping[str, Any]) -> dict[str, Any]:
        """The flags as the engine will run them (what it changes silently applied, omitted flags dropped)."""

    @abc.abstractmethod
    def violations(self, flags: Mapping[str, Any], env: Mapping[str, str], *, tp_size: int) -> list[str]:
        """Every reason the engine would reject the point or fail on it; empty when worth a launch."""

    @abc.abstractmethod
    def tie_caps(self, flags: Mapping[str, Any], highest_load: int) -> dict[str, Any]:
        """A speculative point's running cap and CUDA-graph ceiling set together (a study's ``speculative_caps: tie``)."""

    # ---- the running batch ----------------------------------------------------------------------------------------
    @abc.abstractmethod
    def running_cap(self, flags: Mapping[str, Any]) -> int | None:
        """The most requests the server runs at once, when known before the launch (None: the engine's default)."""

    @abc.abstractmethod
    def speculation(self, flags: Mapping[str, Any]) -> str | None:
        """The speculative algorithm the engine runs, or None when speculation is off."""

    @abc.abstractmethod
    def drafter(self, flags: Mapping[str, Any]) -> str | None:
        """The draft model the point loads (None without speculation or without a draft model)."""

    @abc.abstractmethod
    def draft_store(self, flags: Mapping[str, Any]) -> str | None:
        """What drafts for a speculative point without a draft model, named by its settings (None: nothing such)."""

    @abc.abstractmethod
    def accept_source(self, flags: Mapping[str, Any], env: Mapping[str, str], simulated: bool) -> str | None:
        """Where a trial's accept length comes from: None without speculation, ``"simulated"`` or ``"measured"``."""

    @abc.abstractmethod
    def sets_simulated_acceptance(self, env: Mapping[str, str]) -> bool:
        """Whether the environment asks the engine to act as if a chosen accept length were measured."""

    # ---- memory ---------------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def memory_fraction(self, flags: Mapping[str, Any]) -> float | None:
        """The memory fraction the flags give (None: the engine's own choice)."""

    @abc.abstractmethod
    def cuda_graphs(self, flags: Mapping[str, Any]) -> bool:
        """Whether the server captures decode CUDA graphs."""

    @abc.abstractmethod
    def graph_ceiling(self, flags: Mapping[str, Any]) -> float | None:
        """The decode CUDA-graph batch ceiling the flags give (None: the engine's default)."""

    @abc.abstractmethod
    def graph_tokens_per_request(self, flags: Mapping[str, Any]) -> int:
        """Tokens one request holds in a decode CUDA graph (a speculative verify holds its draft tokens + 1)."""

    @abc.abstractmethod
    def prefill_chunk(self, flags: Mapping[str, Any]) -> float | None:
        """The largest prefill chunk in tokens the flags give (None: the engine's default)."""

    @abc.abstractmethod
    def kv_token_cap(self, flags: Mapping[str, Any]) -> int | None:
        """The most tokens the flags let the KV cache hold whatever the memory (None: no such limit)."""

    @abc.abstractmethod
    def stage_share(self, sizes: Sizes, flags: Mapping[str, Any]) -> float:
        """The share of the target's layers (their weights and KV cache) on one GPU of the fullest pipeline stage
        (1 without pipeline parallel)."""

    @abc.abstractmethod
    def kv_bytes_per_token(self, sizes: Sizes, flags: Mapping[str, Any], *, tp_size: int) -> float:
        """Bytes one token takes in one GPU's KV cache (the target's layers, and the drafter's where it shares the
        pool)."""


class StudyEngine(Protocol):
    """What ``Engine.for_study`` reads of a study (``autotune.space.StudySpec`` has it)."""

    @property
    def engine(self) -> str: ...

    @property
    def sim(self) -> Any: ...  # the simulator's section (profile, time scale), None for other engines

    @property
    def seed(self) -> int: ...


@dataclass(frozen=True)
class Identity:
    """Which engine produced a result, as the trial record names it (``autotune.trial.records.EngineInfo``)."""

    engine: str
    version: str
    simulated: bool
    gpu_name: str
    gpu_count: int
    profile: str | None = None
    time_scale: float | None = None


class Engine(abc.ABC):
    """Turns a TrialConfig into a LaunchSpec and checks it on the worker. Both engines print SGLang's log lines, which
    ``parse_log_phases`` and ``classify_failure`` read.

    Ownership: the engine never starts or stops processes (``autotune.trial.launcher`` does). ``launch_spec`` is pure;
    ``preflight`` may run subprocesses on the worker that will launch the server.
    """

    name: str
    simulated: bool
    model: ClassVar[EngineModel]  # what the search policy reads of this engine's flags
    cache_help: bool = True  # SGLang's --help costs 20-40 s; the simulator's is cheap and changes with the code

    @classmethod
    @abc.abstractmethod
    def for_study(cls, study: StudyEngine) -> Engine:
        """The engine a study's trials launch (its options from the study)."""

    @abc.abstractmethod
    def command(self) -> tuple[str, ...]:
        """What runs a server, before its flags: ``(python, "-m", "sglang.launch_server")``."""

    def normalize(self, cfg: TrialConfig) -> TrialConfig:
        """The configuration as the server will run it: what SGLang changes silently applied (the simulator takes the
        same flags and makes the same changes), so a trial's recorded flags are what ran."""
        return replace(cfg, flags=self.model.normalize(cfg.flags))

    def violations(self, cfg: TrialConfig) -> list[str]:
        """Why the server would reject this configuration or fail on it (``EngineModel.violations``)."""
        return self.model.violations(cfg.flags, cfg.env, tp_size=cfg.tp_size)

    def parse_log_phases(self, text: str) -> PhaseTimings:
        """Launch phases from the server's log (both engines print SGLang's lines)."""
        return parse_log_phases(text)

    def classify_failure(self, log_tail: str, *, ready: bool) -> FailureKind:
        """Why a server died, from its log tail."""
        return classify_failure(log_tail, ready=ready)

    def memory_sizes(self, model_path: str, drafters: tuple[str, ...]) -> Sizes | None:
        """What the study's model takes in GPU memory, for the pre-launch prediction (None: unknown). May read the
        local GPUs or model files; raises AutotuneError, OSError, ValueError or KeyError when they cannot be read."""
        return None

    def declared_gpu_name(self) -> str | None:
        """The GPU the engine says it runs on before it runs (a simulator's profile), else None (read from the
        server)."""
        return None

    @abc.abstractmethod
    def identity(
        self,
        *,
        release: str | None,
        server_info: Mapping[str, Any],
        gpu_names: Sequence[str],
        gpus: int,
        declared_gpu: str | None = None,
    ) -> Identity:
        """Which engine a trial ran on, from what its server reported (``release``, ``/server_info``, the GPUs it
        saw; each may be empty for a server that never answered) and the GPUs it was given. ``declared_gpu``:
        ``declared_gpu_name()``, read by the caller (this method does no I/O)."""

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
