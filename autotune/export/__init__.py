"""Export a finished (or running) study for production: ``results/<study>/best/``.

``export_study`` writes the launch script, the Ray Serve config, best.json, pareto.json, report.md and two SVG charts;
``format_summary_table`` is the table printed in the terminal at the end of a study. Every artifact names the engine
that produced its numbers (simulated results are never presented as measurements).
"""

from __future__ import annotations

from autotune.export.errors import ExportError
from autotune.export.summary import format_summary_table
from autotune.export.writer import ExportResult, export_study, half_export

__all__ = ["ExportError", "ExportResult", "export_study", "format_summary_table", "half_export"]
