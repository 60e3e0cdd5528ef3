"""``serve_app.app:build_app``, the import path of exported Serve configs; the code is ``autotune.serve.app``."""

from autotune.serve.app import EngineArgs, EngineServer, build_app, build_slot_app  # noqa: F401
