"""The simulated SGLang engine: ``python -m autotune.sim.server --sim-profile NAME <sglang flags>``.

Results produced by it are SIMULATED from a performance model of a named profile, never measurements.
See ``docs/simulator.md``. ``adapter.SimEngine`` is its engine adapter, which ``autotune.engines`` registers by import
path.
"""
