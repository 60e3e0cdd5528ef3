"""``python -m autotune.report results/<study>``: re-render the study's ``best/`` from its records (no Ray), with a
self-contained ``report.html`` beside ``report.md``. ``--json`` prints the study's summary for scripts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autotune.core.errors import AutotuneError

EXAMPLES = """
examples:
  python -m autotune.report results/smoke             # best/ again, and best/report.html
  python -m autotune.report results/smoke --json | jq .best.params
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m autotune.report",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("study_dir", type=Path, help="a study's results directory (results/<study>)")
    p.add_argument("--json", action="store_true", help="print the study's summary as JSON instead of the table")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from autotune.export import format_summary_table, half_export
    from autotune.report.render import rerender
    from autotune.report.study_summary import print_summary

    if half_export(args.study_dir):
        print(f"warning: {half_export(args.study_dir)}", file=sys.stderr)
    try:
        done = rerender(args.study_dir)
    except AutotuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    code = 0 if done.export.best is not None else 3
    if args.json:
        print_summary(args.study_dir, exit_code=code)
    elif not args.quiet:
        table = format_summary_table(
            done.records, done.objectives, done.load_levels, finalists=done.finalists, estimates=done.estimates
        )
        print(table, end="")
        print(f"\nre-rendered {done.export.best_dir}: {', '.join(p.name for p in done.export.paths)}, {done.html.name}")
        print(f"open {done.html.resolve().as_uri()}")
    return code


if __name__ == "__main__":
    sys.exit(main())
