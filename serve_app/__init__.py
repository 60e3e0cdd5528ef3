"""Import path kept for Serve configs exported before the app moved to ``autotune.serve`` (``serve_app.app:build_app``)."""
