"""The report's traffic section: what the study sent, per level (lengths, prefix reuse, open-loop pacing). Pure.

Every trial of a study sends the same requests (the workload is seeded), so one measured record describes them; the
first completed record by trial number is used. A study of random ids at concurrencies only gets no section.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotune.export.accessors import fmt
from autotune.trial.records import TrialOutcome, TrialRecord


def traffic_section(records: Sequence[TrialRecord]) -> list[str]:
    rec = next(
        (
            r
            for r in sorted(records, key=lambda r: r.number)
            if r.outcome is TrialOutcome.COMPLETE and r.bench is not None and any(lv.traffic for lv in r.bench.levels)
        ),
        None,
    )
    if rec is None or rec.bench is None:
        return []
    if rec.bench.workload is None and not any(lv.load for lv in rec.bench.levels):
        return []  # random ids at concurrencies: nothing to say beyond the study's lengths
    out = ["## Traffic", ""]
    info = rec.bench.workload
    if info:
        dropped = info.get("dropped") or {}
        dropped_text = ", ".join(f"{k} {v}" for k, v in sorted(dropped.items())) or "none"
        kept = f"; {info['kept']} entries passed its filters so far, dropped: {dropped_text}" if "kept" in info else ""
        out += [f"Workload `{info.get('kind')}`, tokens counted by {info.get('token_rule')}{kept}.", ""]
    out += [
        "| level | requests | prompt tokens mean / median / p99 | output tokens mean / median / p99 | prefix reuse "
        "| sent req/s | send lateness p99 (ms) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for lv in rec.bench.levels:
        t = lv.traffic
        if t is None:
            continue
        late = fmt(1000 * lv.lateness.p99_s, 1) if lv.lateness is not None else "-"
        out.append(
            f"| {lv.key} | {t.requests} | {t.prompt_tokens_mean:.0f} / {t.prompt_tokens_median:.0f} / "
            f"{t.prompt_tokens_p99:.0f} | {t.output_tokens_mean:.0f} / {t.output_tokens_median:.0f} / "
            f"{t.output_tokens_p99:.0f} | {100 * t.prefix_reuse:.1f}% | {fmt(lv.offered_rate, 2)} | {late} |"
        )
    out += [
        "",
        "Prefix reuse: the share of prompt text an ideal prefix cache, flushed before the level, would already hold "
        "when each request arrives (docs/benchmark.md). Sent req/s and lateness: open-loop (rate, trace) levels.",
        "",
    ]
    return out
