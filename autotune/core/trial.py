"""Typed values between the searcher and the engine: a trial's configuration and its launch spec."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FlagValue = str | int | float | bool


def _whole(value: Any) -> int:
    """A parallel size from a flag value (int or numeric string); 1 where absent, a switch or not a positive integer."""
    if isinstance(value, bool) or value is None:
        return 1
    try:
        size = int(value)
    except (TypeError, ValueError):
        return 1
    return size if size > 0 else 1


IPV4_ONLY = (
    "autotune reaches its servers over IPv4 only; use 127.0.0.1 (loopback) or one of this machine's IPv4 addresses"
)


def is_ipv6(host: str) -> bool:
    """An IPv6 address (``::1``, ``[::1]``): free ports are picked and servers reached (``LaunchSpec.base_url``) over
    IPv4, where no host name or IPv4 address has a colon."""
    return ":" in host


def server_gpus(tp_size: int, flags: Mapping[str, Any]) -> int:
    """GPUs one SGLang server uses with ``flags`` (keyed without dashes; a bare switch is ``True``): tensor x pipeline
    parallel, times data parallel unless DP attention is on (``--enable-dp-attention`` or ``--attn-dp-size`` > 1),
    whose data-parallel ranks share the tensor-parallel GPUs (SGLang's ``srt/layers/dp_attention.py``: attention TP
    size = tp / dp); ``srt/ray/engine.py`` reserves ``tp x pp`` GPUs with DP attention, else ``dp x tp x pp``."""
    attn_dp = flags.get("enable-dp-attention") not in (None, False) or _whole(flags.get("attn-dp-size")) > 1
    dp = 1 if attn_dp else _whole(flags.get("dp-size"))
    return int(tp_size) * _whole(flags.get("pp-size")) * dp


@dataclass(frozen=True)
class TrialConfig:
    """One point of the search, resolved: server flags and environment, fixed and sampled merged.

    ``flags`` are keyed by the flag name without dashes (``"speculative-num-steps"``).
    A value of ``True`` is a bare switch (``--disable-custom-all-reduce``); ``False`` or ``None`` omits the flag.
    ``env`` holds only the variables autotune sets for the server (``NCCL_*``, ``SGLANG_*``, ...).
    ``params`` are the sampled values by parameter name, as the sampler saw them.
    """

    model_path: str
    tp_size: int
    flags: Mapping[str, FlagValue | None] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    host: str = "127.0.0.1"
    nnodes: int = 1  # nodes the server spans (SGLang's --nnodes); ``gpus`` counts the GPUs of all of them

    @property
    def gpus(self) -> int:
        """GPUs one server needs (tensor x pipeline x data parallel: ``server_gpus``)."""
        return server_gpus(self.tp_size, self.flags)


@dataclass(frozen=True)
class LaunchSpec:
    """Exactly what to execute for one server. Pure data: building it probes nothing.

    ``env`` is applied on top of the inherited environment; ``unset_env`` names inherited variables to remove
    (for example ``OMP_NUM_THREADS``, which Ray sets to the actor's CPU count).
    """

    engine: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    host: str
    port: int
    gpus: int
    unset_env: tuple[str, ...] = ()
    ready_timeout_s: float = 900.0
    nnodes: int = 1  # nodes the server spans (SGLang's --nnodes); ``gpus`` counts the GPUs of all of them

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"
