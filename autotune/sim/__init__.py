"""The simulated SGLang engine: ``python -m autotune.sim.server --sim-profile NAME <sglang flags>``.

Results produced by it are SIMULATED from a performance model of a named profile, never measurements.
See ``docs/simulator.md``.
"""
