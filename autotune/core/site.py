"""Site policy: environment variables the machine's operator sets for every process, which every server keeps.

A site (a cluster, a lent GPU machine) may switch NVLink multicast off for everything it runs by setting
``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and ``NVSHMEM_DISABLE_NVLS=1`` in the environment.
autotune reads them from the parent environment of the process that builds a server's environment, and

- keeps them, with the site's values, in every server environment of every engine (a study cannot override them:
  ``check_study_env`` says so clearly, and ``server_environment`` re-applies them last);
- refuses NVLS switches (``--enable-nccl-nvls``, ``--enable-symm-mem``, ``NCCL_NVLS_ENABLE`` other than 0) only while
  the site turns multicast off;
- adds nothing where the site sets none of them: NVLS is then an ordinary, searchable setting.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from autotune.core.errors import AutotuneError

# The variables a site may set to keep NVLink multicast off, and the value that means "off".
MULTICAST_VARS: Mapping[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
# Server flags that turn NVLink multicast on (SGLang then writes NCCL_NVLS_ENABLE=1 over the environment).
NVLS_FLAGS: tuple[str, ...] = ("enable-nccl-nvls", "enable-symm-mem")
NVLS_ENV = "NCCL_NVLS_ENABLE"


class SiteError(AutotuneError):
    """A study or an export asks for something the site's policy forbids (overriding a site variable, NVLS on)."""


@dataclass(frozen=True)
class SitePolicy:
    """The site's variables (name -> value, only those the parent environment sets)."""

    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def multicast_off(self) -> bool:
        """Whether the site switches NVLink multicast off (any of its variables at its "off" value)."""
        return any(self.env.get(name) == off for name, off in MULTICAST_VARS.items())

    def describe(self) -> str:
        if not self.env:
            return "the site sets no multicast variable"
        return "the site sets " + " ".join(f"{k}={v}" for k, v in sorted(self.env.items()))


def site_policy(environ: Mapping[str, str] | None = None) -> SitePolicy:
    """The policy of the current process's environment (or of ``environ``)."""
    source = os.environ if environ is None else environ
    return SitePolicy(env={name: source[name] for name in MULTICAST_VARS if name in source})


def study_env_problems(env: Mapping[str, str], policy: SitePolicy | None = None) -> list[str]:
    """What a study's environment does against the site: a site variable set to another value."""
    policy = site_policy() if policy is None else policy
    return [
        f"{name}={env[name]} overrides the site's {name}={value}: {policy.describe()} for every process, and autotune "
        f"keeps it in every server it starts. Fix: remove {name} from the study (or set it to {value!r})"
        for name, value in sorted(policy.env.items())
        if name in env and str(env[name]) != value
    ]


def nvls_problems(flags: Mapping[str, object], env: Mapping[str, str], policy: SitePolicy | None = None) -> list[str]:
    """NVLS switches in a configuration while the site turns multicast off; empty where the site allows it."""
    policy = site_policy() if policy is None else policy
    if not policy.multicast_off:
        return []
    out = [
        f"--{name} makes SGLang set NCCL_NVLS_ENABLE=1 (NVLink multicast), which this site turns off "
        f"({policy.describe()}). Fix: remove the flag"
        for name in NVLS_FLAGS
        if flags.get(name) not in (None, False)
    ]
    value = env.get(NVLS_ENV)
    if NVLS_ENV not in policy.env and value is not None and str(value).strip() != "0":  # else: study_env_problems
        out.append(
            f"{NVLS_ENV}={value} turns NVLink multicast on, which this site turns off ({policy.describe()}). "
            f'Fix: set {NVLS_ENV}="0" or leave it unset'
        )
    return out


def check_study_env(env: Mapping[str, str], policy: SitePolicy | None = None) -> None:
    """Raise SiteError when a study's environment overrides a site variable."""
    problems = study_env_problems(env, policy)
    if problems:
        raise SiteError("; ".join(problems))


def server_environment(
    base: Mapping[str, str],
    *,
    unset: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
    policy: SitePolicy | None = None,
) -> dict[str, str]:
    """A server's full environment: ``base`` minus ``unset``, plus ``env``, then the site's variables re-applied.

    ``policy`` defaults to the site variables found in ``base`` (the parent environment). Whatever ``unset`` or ``env``
    say, the result holds every site variable with the site's value.
    """
    policy = site_policy(base) if policy is None else policy
    out = dict(base)
    for name in unset:
        out.pop(name, None)
    out.update(env or {})
    out.update(policy.env)
    return out
