"""What a trial's server ran, typed: the engine, the Python module, its options in command-line order, and its
parallelism. A ``TrialRecord`` keeps it beside the exact argv, so the export reads fields, not command lines.

``Launched.from_argv`` reads it from the argv the replica launched (the port it picked and the release's flag names
in it), once, where the runner writes the record; it also reads records written before the launch was kept
(``TrialRecord.from_json`` of an old ``trials.jsonl`` line).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autotune.core.secrets import REDACTED, is_secret
from autotune.core.trial import server_gpus

Option = tuple[str, str | None]  # (flag without dashes, its value; None for a bare switch)


@dataclass(frozen=True)
class Launched:
    """``python -m <module> <options>`` as the trial's server ran it. ``engine`` is the engine that ran it (None only
    in a record written before launches were kept, whose server never reported its engine)."""

    engine: str | None
    module: str
    options: tuple[Option, ...]
    tp_size: int = 1  # tensor parallel (``--tp-size``)
    dp_size: int = 1  # data parallel (``--dp-size``)

    @property
    def gpus(self) -> int:
        """GPUs the server used: tensor x pipeline x data parallel, data parallel only without DP attention
        (``autotune.core.trial.server_gpus``)."""
        flags = {k: True if v is None else v for k, v in reversed(self.options)}  # the first value given wins
        return server_gpus(self.tp_size, {**flags, "dp-size": self.dp_size})

    def option(self, name: str) -> str | None:
        """The value of ``--name`` (the first one given), else None (also for a bare switch)."""
        return next((v for k, v in self.options if k == name), None)

    def has(self, name: str) -> bool:
        return any(k == name for k, _ in self.options)

    def redacted(self, extra_flags: Iterable[str] = ()) -> Launched:
        """The options with the value of every secret flag replaced by ``<redacted>`` (``autotune.core.secrets``)."""
        names = set(extra_flags)
        options = tuple((k, REDACTED if v is not None and is_secret(k, names, value=v) else v) for k, v in self.options)
        return replace(self, options=options)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "module": self.module,
            "options": [[k, v] for k, v in self.options],
            "tp_size": self.tp_size,
            "dp_size": self.dp_size,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Launched:
        """Raises ValueError / TypeError / KeyError for a value that is not a launch."""
        options = tuple((str(k), None if v is None else str(v)) for k, v in data["options"])
        engine = data.get("engine")
        return cls(
            engine=None if engine is None else str(engine),
            module=str(data["module"]),
            options=options,
            tp_size=int(data.get("tp_size", 1)),
            dp_size=int(data.get("dp_size", 1)),
        )

    @classmethod
    def from_argv(cls, engine: str | None, argv: Sequence[str]) -> Launched:
        """``[python, -m, module, --a, 1, --b, ...]`` -> the launch; raises ValueError for an argv that does not run a
        Python module with ``--options``, or whose ``--tp-size`` / ``--dp-size`` is not a whole number."""
        if "-m" not in argv or argv.index("-m") + 1 >= len(argv):
            raise ValueError(f"the argv does not run a Python module (`python -m ...`): {list(argv)!r}")
        i = argv.index("-m")
        module, rest = argv[i + 1], list(argv[i + 2 :])
        options: list[Option] = []
        j = 0
        while j < len(rest):
            token = rest[j]
            if not token.startswith("--"):
                raise ValueError(f"unexpected argument {token!r} in the argv (every option starts with --)")
            name, eq, inline = token[2:].partition("=")
            if eq:
                options.append((name, inline))
                j += 1
            elif j + 1 < len(rest) and not rest[j + 1].startswith("--"):
                options.append((name, rest[j + 1]))
                j += 2
            else:
                options.append((name, None))
                j += 1
        given: dict[str, str | None] = {}
        for name, value in options:
            given.setdefault(name, value)
        tp = given.get("tp-size") or given.get("tp") or "1"
        dp = given.get("dp-size") or given.get("dp") or "1"
        try:
            tp_size, dp_size = int(tp), int(dp)
        except ValueError as exc:
            raise ValueError(f"cannot read --tp-size/--dp-size from the argv ({tp!r}, {dp!r})") from exc
        return cls(engine=engine, module=module, options=tuple(options), tp_size=tp_size, dp_size=dp_size)


def read_launched(engine: str | None, argv: Sequence[str]) -> tuple[Launched | None, str]:
    """``Launched.from_argv``, or None and why for an empty argv (nothing launched) or one it cannot read."""
    if not argv:
        return None, "no argv: nothing was launched"
    try:
        return Launched.from_argv(engine, argv), ""
    except ValueError as exc:
        return None, str(exc)
