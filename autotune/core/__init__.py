"""Leaf values and helpers every layer uses: failure kinds and phase timings (``failures``), the values between the
searcher and the engine (``trial``: ``TrialConfig``, ``LaunchSpec``), the exception tree (``errors``), secret
redaction, GPU queries and a GPU slot's CPU set, pinning a Ray actor or task to a node (``placement``), the site's
multicast policy, the simulator's clock protocol and the dashboard's attribute names. Nothing here imports anything of
autotune outside ``core``."""
