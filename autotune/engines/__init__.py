"""Engines behind one small contract (``base.Engine``, with the ``base.EngineModel`` the search policy reads), and the
registry that names them.

An engine is registered by the import path of its adapter, so that the code above names no engine and the registry
imports none until it is asked for: the simulator's adapter lives in its own package (``autotune.sim.adapter``, which
imports this contract, not the other way round). A second engine is an adapter module and one entry here; it must
pass ``tests/engines/test_contract.py``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from autotune.engines.base import Engine, EngineModel, StudyEngine

# name -> "module:class" of the adapter
ENGINES: Mapping[str, str] = {
    "sglang": "autotune.engines.sglang:SGLangEngine",  # real SGLang
    "sim": "autotune.sim.adapter:SimEngine",  # the simulated engine
}


def engine_class(name: str) -> type[Engine]:
    """The adapter class registered as ``name``. Raises ValueError naming the registered engines."""
    path = ENGINES.get(name)
    if path is None:
        raise ValueError(f"unknown engine {name!r}: use 'sglang' (real SGLang) or 'sim' (the simulated engine)")
    module, _, cls = path.partition(":")
    found = getattr(importlib.import_module(module), cls)
    if not (isinstance(found, type) and issubclass(found, Engine)):
        raise TypeError(f"engine {name!r}: {path} is not an Engine subclass; fix the entry in autotune.engines.ENGINES")
    return found


def get_engine(name: str, **options: object) -> Engine:
    """Return the engine adapter called ``name`` ("sglang" or "sim"), built with the adapter's own options."""
    return engine_class(name)(**options)


def engine_for(study: StudyEngine) -> Engine:
    """The engine a study's trials launch, with its options from the study (``Engine.for_study``)."""
    return engine_class(study.engine).for_study(study)


def engine_model(name: str) -> EngineModel:
    """What the search policy reads of engine ``name``'s flags (``Engine.model``)."""
    return engine_class(name).model
