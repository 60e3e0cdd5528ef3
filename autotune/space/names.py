"""Which server flags and environment variables a study may set, and why some are refused."""

from __future__ import annotations

import re
from collections.abc import Iterable

from autotune.core.site import NVLS_ENV, NVLS_FLAGS, SitePolicy, site_policy
from autotune.space.schema import Problem

FLAG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
STUDY_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

# Flags autotune sets itself for every server.
MANAGED_FLAGS: dict[str, str] = {
    "host": "autotune binds every server itself; set `server.host` instead (loopback 127.0.0.1 unless you need more)",
    "port": "autotune gives each concurrent server its own free port; remove it",
    "nccl-port": "autotune gives each concurrent server its own NCCL port; remove it",
}
# Variables autotune (through Ray) sets for every server.
MANAGED_ENV: dict[str, str] = {
    "CUDA_VISIBLE_DEVICES": "Ray gives each trial's server its own GPUs through it, so that concurrent trials never "
    "share one; remove it (to keep a study off some GPUs, set it for `python -m autotune.search` or `ray start`)",
}
# Flags that have their own key under `server:` (autotune needs their values to place and describe trials).
SERVER_KEY_FLAGS: dict[str, str] = {
    "model-path": "server.model_path",
    "model": "server.model_path",
    "tp-size": "server.tp_size",
    "tp": "server.tp_size",
    "tensor-parallel-size": "server.tp_size",
}
# SGLang's other names for the parallel sizes autotune counts a trial's GPUs from (``core.trial.server_gpus`` reads
# ``dp-size`` and ``pp-size``): under another name a trial would reserve too few GPUs for the server it launches.
PARALLEL_ALIASES: dict[str, str] = {
    "data-parallel-size": "dp-size",
    "dp": "dp-size",
    "pipeline-parallel-size": "pp-size",
}
# SGLang's other names for flags autotune reads by their long name: under the short one a speculative point would be
# refused as having no drafter, and its drafter left out of the memory and health checks.
READ_ALIASES: dict[str, tuple[str, str]] = {
    "speculative-draft-model": ("speculative-draft-model-path", "which autotune reads the drafter from"),
}
NVLS_WHY = (
    "NVLink multicast (NVLS) stays off where the site turns it off: SGLang sets NCCL_NVLS_ENABLE=1 when "
    "--enable-nccl-nvls or --enable-symm-mem is given, and NVLS needs fabric support that shared or partitioned GPU "
    "nodes lack (NCCL init or graph capture then fails or hangs)"
)


def _site_note(policy: SitePolicy) -> str:
    return f"{NVLS_WHY}; {policy.describe()} (autotune.core.site)"


def flag_problems(key: str, name: str) -> list[Problem]:
    """Problems with a server flag name as written in a study (``server.flags`` key or a param's ``flag:``)."""
    if name.startswith("-"):
        bare = name.lstrip("-")
        return [Problem(key, f"flag `{name}` is written with leading dashes", f"write it as `{bare}`")]
    if "_" in name and FLAG_RE.match(name.replace("_", "-")):
        return [
            Problem(
                key, f"flag `{name}` uses underscores", f"SGLang flags use dashes: write `{name.replace('_', '-')}`"
            )
        ]
    if not FLAG_RE.match(name):
        return [
            Problem(key, f"`{name}` is not a valid flag name", "use the flag's name without dashes, e.g. `page-size`")
        ]
    if name in MANAGED_FLAGS:
        return [Problem(key, f"`--{name}` is managed by autotune", MANAGED_FLAGS[name])]
    if name in SERVER_KEY_FLAGS:
        where = SERVER_KEY_FLAGS[name]
        return [
            Problem(key, f"`--{name}` belongs in `server:`", f"set `{where}` instead (it is fixed for every trial)")
        ]
    if name in PARALLEL_ALIASES:
        short = PARALLEL_ALIASES[name]
        return [
            Problem(
                key,
                f"`--{name}` is SGLang's other name for `--{short}`, which autotune reads to count a trial's GPUs",
                f"write `{short}`",
            )
        ]
    if name in READ_ALIASES:
        long, why = READ_ALIASES[name]
        return [Problem(key, f"`--{name}` is SGLang's other name for `--{long}`, {why}", f"write `{long}`")]
    policy = site_policy()
    if name in NVLS_FLAGS and policy.multicast_off:
        return [Problem(key, f"`--{name}` is refused on this site", f"remove it. {_site_note(policy)}")]
    return []


def env_problems(key: str, name: str, values: Iterable[str | None] = ()) -> list[Problem]:
    """Problems with an environment variable a study sets, given the string values it may take (None = unset)."""
    if not ENV_RE.match(name):
        return [Problem(key, f"`{name}` is not a valid environment variable name", "use letters, digits and _")]
    if name in MANAGED_ENV:
        return [Problem(key, f"`{name}` is managed by autotune", MANAGED_ENV[name])]
    policy = site_policy()
    if name in policy.env:
        site_value = policy.env[name]
        bad = sorted({v for v in values if v is not None and v != site_value})
        if bad:
            return [
                Problem(
                    key,
                    f"{name} is set by the site for every process ({name}={site_value}); the study sets {', '.join(bad)}",
                    f'remove it from the study (or set it to "{site_value}"): autotune keeps the site\'s value in every '
                    f"server. {_site_note(policy)}",
                )
            ]
    if name == NVLS_ENV and policy.multicast_off:
        bad = sorted({v for v in values if v is not None and v != "0"})
        if bad:
            return [
                Problem(
                    key,
                    f"{NVLS_ENV} may only be 0 on this site, got {', '.join(bad)}",
                    f'set it to "0" or remove it. {_site_note(policy)}',
                )
            ]
    return []
