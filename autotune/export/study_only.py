"""Benchmark-only settings: what a study measured with but production must not run with. Pure.

A study marks them in ``server.study_only`` (flag name without dashes, or a variable, with the reason); the ones every
study uses the same way are known here and marked automatically. They stay in the records; the export leaves them out
of ``launch.sh`` and ``serve_config.yaml`` and lists them in the report under "measured with; remove or re-measure on
real weights".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

SIMULATED_ACCEPTANCE_ENV = "SGLANG_SIMULATE_ACC_LEN"

# (flag, value) pairs that are benchmark-only whatever the study says, with the reason.
KNOWN_FLAGS: Mapping[tuple[str, str], str] = {
    ("load-format", "dummy"): "random weights (--load-format dummy): speed and memory are real, outputs and the "
    "speculative accept length are not; serve the real weights",
    ("speculative-draft-load-format", "dummy"): "random drafter weights: the accept length is not a real one",
}
# Variables that are benchmark-only whatever their value.
KNOWN_ENV: Mapping[str, str] = {
    SIMULATED_ACCEPTANCE_ENV: "simulated acceptance: SGLang draws each step's accept length instead of verifying the "
    "drafter's tokens, so speculative figures assume that accept length; re-measure with real weights",
}


@dataclass(frozen=True)
class StudyOnly:
    """One benchmark-only setting of a trial: a flag (``value`` None for a bare switch) or a variable."""

    kind: Literal["flag", "env"]
    name: str
    value: str | None
    reason: str

    @property
    def text(self) -> str:
        """As written on a command line: ``--load-format dummy`` or ``SGLANG_SIMULATE_ACC_LEN=3.0``."""
        if self.kind == "env":
            return f"{self.name}={self.value}"
        return f"--{self.name}" + (f" {self.value}" if self.value is not None else "")


def study_only_settings(
    flags: Mapping[str, str | None], env: Mapping[str, str], marked: Mapping[str, str]
) -> tuple[StudyOnly, ...]:
    """The benchmark-only settings among a trial's ``flags`` (name -> value, None for a switch) and ``env``.

    ``marked`` is the study's ``server.study_only`` (name -> reason; an empty reason reads "marked by the study").
    """
    out: list[StudyOnly] = []
    for name, value in flags.items():
        reason = marked.get(name) if name in marked else KNOWN_FLAGS.get((name, str(value)))
        if reason is not None:
            out.append(StudyOnly("flag", name, value, reason or "marked benchmark-only by the study"))
    for name, value in env.items():
        reason = marked.get(name) if name in marked else KNOWN_ENV.get(name)
        if reason is not None:
            out.append(StudyOnly("env", name, value, reason or "marked benchmark-only by the study"))
    return tuple(out)


def simulated_acceptance(env: Mapping[str, str]) -> str | None:
    """The simulated accept length a trial ran with (``SGLANG_SIMULATE_ACC_LEN`` > 0), or None."""
    value = env.get(SIMULATED_ACCEPTANCE_ENV)
    try:
        return value if value is not None and float(value) > 0 else None
    except ValueError:
        return None
