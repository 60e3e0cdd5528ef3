"""Checking an exported configuration with SGLang's own client: the pure verdict (``compare``: figures against the
study's, pooled over relaunches, and the two clients' offset), ``verify.md`` (``report``), running ``bench_serving``
(``sglang``), and the CLI ``python -m autotune.verify`` (``__main__``)."""
