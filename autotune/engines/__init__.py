"""Engines behind one small contract (see ``base.Engine``)."""

from __future__ import annotations

from autotune.engines.base import Engine


def get_engine(name: str, **options: object) -> Engine:
    """Return the engine adapter called ``name`` ("sglang" or "sim")."""
    if name == "sglang":
        from autotune.engines.sglang import SGLangEngine

        return SGLangEngine(**options)  # type: ignore[arg-type]  # options are the engine's own keyword arguments, passed through untyped
    if name == "sim":
        from autotune.engines.sim import SimEngine

        return SimEngine(**options)  # type: ignore[arg-type]  # options are the engine's own keyword arguments, passed through untyped
    raise ValueError(f"unknown engine {name!r}: use 'sglang' (real SGLang) or 'sim' (the simulated engine)")
