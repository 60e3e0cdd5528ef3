"""What a study's intervals cover, and the between-machine variation where the study has measured it.

A study's intervals come from launches on the machine it ran on (relaunches, or a launch's measurement windows). A
verify run (``python -m autotune.verify``, written to ``<study>/verify/verify.json``), on another node or another day,
measures the exported config again: its differences from the study's figures are the between-machine (or
between-day) variation this study has seen. Pure, apart from reading that file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from autotune.verify.compare import MACHINE_VARIATION

VERIFY_JSON = Path("verify") / "verify.json"


@dataclass(frozen=True)
class MachineVariation:
    source: str  # the verify report it came from
    engine: str  # the verify run's engine banner (its node)
    trial: int | None  # the trial verify measured
    rows: tuple[tuple[int | str, str, float, str], ...]  # (level, metric, relative difference, verdict)


def read_variation(study_dir: Path) -> MachineVariation | None:
    """The verify run's differences from the study's figures, or None when the study has no complete verify run of
    the configuration it measured (a run that left out the study's benchmark-only settings, ``left_out``, measured
    another command: its differences are not the machine's)."""
    path = Path(study_dir) / VERIFY_JSON
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not data.get("complete") or data.get("left_out"):
        return None
    rows = tuple(
        (_level(f["concurrency"]), str(f["metric"]), float(f["rel_diff"]), str(f["verdict"]))
        for f in data.get("figures") or []
        if f.get("rel_diff") is not None and f.get("judged")
    )
    if not rows:
        return None
    return MachineVariation(str(path), str(data.get("engine_banner") or ""), data.get("trial"), rows)


def _level(value: object) -> int | str:
    """A figure's level: a concurrency, or an open-loop level's key (``rate8``)."""
    text = str(value)
    return int(text) if text.isdigit() else text


def coverage_lines(variation: MachineVariation | None) -> list[str]:
    """report.md's section on what the intervals cover."""
    out = [
        "## What the intervals cover",
        "",
        "Every interval in this report is for relaunches on the measured machine: launches of this study, on the "
        "machine (or node) it ran on, in the period it ran. They say how much a config's figures move from one launch "
        "to the next there, not how they move on another machine, node or day.",
    ]
    if variation is None:
        return out + [
            "",
            f"This study has no between-machine measurement yet. The variation known so far is about "
            f"±{MACHINE_VARIATION:.0%} (an exported H200 winner relaunched on another node two days "
            f"later measured 9-12% above its study at concurrency 16 and 64). "
            "`python -m autotune.verify results/<study>` on another node or day measures it for this "
            "study, and the next export shows it here.",
            "",
        ]
    out += [
        "",
        f"Between-machine variation measured by a verify run (`{variation.source}`, trial {variation.trial}; "
        f"{variation.engine}): the export measured again against this study's figures.",
        "",
        "| load level | metric | verify vs study | verdict |",
        "| --- | --- | --- | --- |",
    ]
    out += [f"| {c} | {m} | {d:+.1%} | {v} |" for c, m, d, v in variation.rows]
    return out + [""]
