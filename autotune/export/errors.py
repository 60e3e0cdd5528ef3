"""The export's own error, a leaf of the project's exception tree."""

from __future__ import annotations

from autotune.core.errors import AutotuneError


class ExportError(AutotuneError):
    """The export was asked for something it cannot do (bad objectives, load levels, environment names)."""
