"""The simulated engine's adapter: ``python -m autotune.sim.server``, launched exactly like SGLang with the same flags.

Registered in ``autotune.engines`` by its import path, so nothing below the study names the simulator. It speaks
SGLang's flags and log lines, so its model (validity rules, running cap, memory plan) is SGLang's
(``autotune.engines.sglang_model``); what is its own: the command, the profile it simulates, the sizes and GPU that
profile declares. Its results are SIMULATED (a performance model of a named profile), never measurements; every
record says so.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from autotune import __version__
from autotune.core.trial import FlagValue
from autotune.engines.base import Engine, Identity, StudyEngine, flags_to_argv
from autotune.engines.memory import GB, Sizes
from autotune.engines.preflight import run_help
from autotune.engines.sglang_model import SGLANG
from autotune.sim.nccl import NcclSettings, nccl_buffer_gb
from autotune.sim.profile import Profile, ProfileError, load_profile


def profile_sizes(profile: Profile) -> Sizes:
    """Sizes from a simulator profile (``autotune.sim.profile.Profile``); the simulator counts GB as 1e9 bytes."""
    hw, m, d = profile.hardware, profile.model, profile.defaults
    drafters: dict[str, tuple[float, int]] = {}
    for dr in profile.drafters:
        for key in (dr.name, *dr.paths):
            drafters[key] = (dr.weight_gb * GB, dr.num_layers)
    return Sizes(
        gpu_mem_bytes=hw.gpu_mem_gb * GB,
        weight_bytes=m.weight_gb * GB,
        kv_bytes_per_token=float(m.kv_bytes_per_token),
        num_layers=m.num_layers,
        kv_replicated=m.kv_replicated,
        drafters=drafters,
        preload_bytes=0.0,
        context_bytes=hw.cuda_context_gb * GB,
        comm_bytes=nccl_buffer_gb(hw, NcclSettings()) * GB,
        activation_bytes_per_token=m.activation_gb_per_1k_tokens * GB / 1000.0,
        graph_bytes_per_bs=m.graph_mem_gb_per_bs * GB,
        default_mem_fraction=d.mem_fraction_static,
        default_graph_max_bs=d.cuda_graph_max_bs,
        default_chunked_prefill=d.chunked_prefill_size,
        source=f"sim profile {profile.name}",
    )


class SimEngine(Engine):
    name = "sim"
    simulated = True
    model = SGLANG  # same flags, same rules: the simulator imitates SGLang
    cache_help = False

    def __init__(
        self,
        profile: str = "h200-llama-1b",
        time_scale: float = 1.0,
        seed: int | None = None,
        python: str | None = None,
    ) -> None:
        self.profile = profile
        self.time_scale = float(time_scale)
        self.seed = seed
        self.python = python or sys.executable

    @classmethod
    def for_study(cls, study: StudyEngine) -> SimEngine:
        if study.sim is None:  # load_study gives every simulated study its sim section
            raise ValueError("a study on the simulated engine needs its sim section (profile, time_scale)")
        return cls(profile=study.sim.profile, time_scale=study.sim.time_scale, seed=study.seed)

    def command(self) -> tuple[str, ...]:
        sim_flags: dict[str, FlagValue | None] = {"sim-profile": self.profile, "sim-time-scale": self.time_scale}
        if self.seed is not None:
            sim_flags["sim-seed"] = self.seed
        return (self.python, "-m", "autotune.sim.server", *flags_to_argv(sim_flags))

    def help_text(self, python: str) -> str:
        return run_help([python, "-m", "autotune.sim.server"], timeout_s=60)

    def release(self) -> str:
        return f"autotune-sim {__version__}"

    def memory_sizes(self, model_path: str, drafters: tuple[str, ...]) -> Sizes | None:
        """The profile's sizes (its model and drafters; the model path and drafter list are the profile's own)."""
        return profile_sizes(load_profile(self.profile))

    def declared_gpu_name(self) -> str | None:
        """The GPU the profile declares (its server reports it once it runs); None for a profile that cannot be read
        (the launch says why)."""
        try:
            return load_profile(self.profile).hardware.gpu_name
        except ProfileError:
            return None

    def identity(
        self,
        *,
        release: str | None,
        server_info: Mapping[str, Any],
        gpu_names: Sequence[str],
        gpus: int,
        declared_gpu: str | None = None,
    ) -> Identity:
        """``declared_gpu``: the profile's GPU, for a server that never answered (a failed launch), so that its trial
        names the same hardware as the study's other trials."""
        sim = server_info.get("sim") or {}
        return Identity(
            engine=self.name,
            version=str(release or self.release()).split()[-1],  # autotune's release, not SGLang's it mimics
            simulated=True,
            gpu_name=f"SIMULATED {sim.get('gpu_name', declared_gpu or '?')}",
            gpu_count=int(sim.get("gpu_count", gpus)),
            profile=self.profile,
            time_scale=float(sim.get("time_scale", self.time_scale)),
        )
