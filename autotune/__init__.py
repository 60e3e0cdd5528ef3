"""autotune: a Ray-distributed autotuner for SGLang serving settings."""

__version__ = "0.1.0"
