"""``python -m autotune.report results/<study>``: re-render ``best/`` (launch.sh, serve_config.yaml, best.json,
report.md, charts) from the study's records, and write ``best/report.html``, one self-contained file. No Ray."""
