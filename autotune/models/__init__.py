"""Model directories for GPU tests and studies: dummy-weight shapes served with ``--load-format dummy``.

See ``autotune.models.dummy`` (kept out of this module's imports so ``python -m autotune.models.dummy`` runs cleanly).
"""
