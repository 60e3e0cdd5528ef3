"""``verify.md``: the verify report (``autotune.verify``) in words and tables, from its ``verify.json`` content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autotune.verify.compare import MACHINE_VARIATION, Figure, bench_serving_levels, client_offsets


def render_markdown(report: dict[str, Any], figures: Sequence[Figure]) -> str:
    lines = [
        f"# Verify: study `{report['study']}`, trial {report['trial']}",
        "",
        f"> {report['engine_banner']}",
        "",
        f"Started `{report['script']}` ({report['kind']}) outside Ray at {report['base_url']} with PYTHON="
        f"`{report['python']}`; ready after {report.get('ready_s', float('nan')):.1f} s; torn down in "
        f"{report.get('teardown_s', float('nan')):.1f} s.",
    ]
    if report["as_measured"]:
        added = " ".join([*(f"{k}={v}" for k, v in report["extra_env"].items()), *report["extra_args"]])
        lines.append(
            f"**As measured:** the study's benchmark-only settings were added back ({added}); these are not "
            "production figures."
        )
    if report.get("left_out"):
        lines.append(
            f"**Production command:** the study measured with benchmark-only settings this run left out "
            f"({'; '.join(report['left_out'])}): the study's figures are not of this command, and a difference may be "
            "theirs, not the machine's (`--as-measured` adds them back)."
        )
    if report["kind"] == "rehearsal":
        lines.append("**Rehearsal:** the simulator as the study measured it; figures are simulated, not measurements.")
    lines += [
        "",
        f"Study figures: {report.get('study_basis', 'the trial')}.",
        "",
        f"Verdict: **{'PASS' if report['ok'] else 'FAIL'}** (judged: {', '.join(report['judged'])}; verify's figure "
        "against the study's 95% interval where recorded (overlapping intervals are shown, not passed); else "
        f"+-{report['tolerance']:.0%} of the study's figure).",
        "",
        *_figure_table(figures),
    ]
    bs = report.get("bench_serving")
    if bs is not None:
        lines += ["", "## SGLang bench_serving", ""]
        if "skipped" in bs:
            lines.append(f"Skipped: {bs['skipped']}.")
        else:
            lines += [
                "| concurrency | prompts | completed | duration (s) | output tok/s | TTFT p99 (ms) | "
                "TPOT median (ms) |",
                "| --- | --- | --- | --- | --- | --- | --- |",
            ]
            for r in bs["levels"]:
                lines.append(
                    f"| {r['concurrency']} | {r['num_prompts']} | {r['completed']} | {r['duration_s']:.1f} | "
                    f"{_n(r['output_tok_per_s'])} | {_n(r['ttft_ms_p99'])} | {_n(r['tpot_ms_median'])} |"
                )
            if bs.get("figures"):
                lines += [
                    "",
                    "Against the study's figures (the same basis and verdict rule as above):",
                    "",
                    *_figure_table(
                        [Figure(**{k: v for k, v in f.items() if k not in ("ok", "rel_diff")}) for f in bs["figures"]]
                    ),
                ]
            offsets = client_offsets(
                (report.get("autotune") or {}).get("levels") or [], bench_serving_levels(bs["levels"])
            )
            if offsets:
                lines += [
                    "",
                    "bench_serving against autotune's client on this same launch (the two clients' offset; "
                    "a study interval narrower than it cannot hold both):",
                    "",
                    "| concurrency | output tok/s | TPOT median |",
                    "| --- | --- | --- |",
                ]
                lines += [
                    f"| {o['concurrency']} | {_signed(o['output_tok_per_s'])} | {_signed(o['tpot_ms.median'])} |"
                    for o in offsets
                ]
    return "\n".join(lines) + "\n"


def _figure_table(figures: Sequence[Figure]) -> list[str]:
    lines = [
        "| concurrency | metric | study | study 95% interval | verify | verify 95% interval | difference | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in figures:
        interval = "none"
        if f.low is not None and f.high is not None:
            width = f", ±{_pct(50 * (f.high - f.low) / abs(f.study))}" if f.study else ""
            interval = f"{f.low:,.2f} .. {f.high:,.2f} (n={f.n}{width})"
        mine = (
            f"{f.measured_low:,.2f} .. {f.measured_high:,.2f}"
            if f.measured_low is not None and f.measured_high is not None
            else "none"
        )
        diff = f"{f.rel_diff:+.1%}" if f.rel_diff is not None else "-"
        verdict = f.verdict if f.judged else f"({f.verdict}; not judged)"
        lines.append(
            f"| {f.concurrency} | {f.metric} | {_n(f.study)} | {interval} | {_n(f.measured)} | {mine} | "
            f"{diff} | {verdict} |"
        )
    return lines + [
        "",
        f"The study's intervals cover relaunches on the machine it measured on. `outside interval`: "
        f"outside them by less than the machine-to-machine variation known so far "
        f"(±{MACHINE_VARIATION:.0%} of the study's figure: another node, another day), so it may be the "
        f"machine; `beyond machine variation`: outside by more than that, a change the known "
        f"variation does not explain.",
    ]


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.2f}%"


def _pct(value: float) -> str:
    """A width in percent, with the decimals a narrow one needs (±0.13%, not ±0%)."""
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%" if value >= 1 else f"{value:.2f}%"
