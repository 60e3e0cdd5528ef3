"""Ray's and Tune's own console output (auth-token notices, Tune's configuration box and TensorBoard hint, raylet
messages such as a retried ``ServeController.graceful_shutdown``) goes to ``results/<study>/logs/ray-console.log``
at the default verbosity; ``--verbose`` leaves it on the console.

It is done at the file-descriptor level, so output from C++ and from Python loggers bound to the original streams is
caught as well; the study's own console keeps writing to duplicates of the original descriptors.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from autotune.progress.console import Console

LOG_NAME = "ray-console.log"


def _fd(stream: IO[str]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None


@contextlib.contextmanager
def ray_output_to_log(log_path: Path, console: Console, *, enabled: bool = True) -> Iterator[Path | None]:
    """While inside, descriptors 1 and 2 write to ``log_path``; ``console`` writes where they wrote before.

    Not ``enabled`` (``--verbose``), Ray's output stays on the console: where the console writes to stderr (``--json``
    keeps stdout for its summary), descriptor 1 writes to stderr too while inside."""
    if not enabled:
        if _fd(console.out) != 2:
            yield None
            return
        sys.stdout.flush()
        saved_out = os.dup(1)
        os.dup2(2, 1)
        try:
            yield None
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            os.dup2(saved_out, 1)
            os.close(saved_out)
        return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr, console.out, console.err):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = {1: os.dup(1), 2: os.dup(2)}
    old_out, old_err = console.out, console.err
    if _fd(console.out) in saved:
        console.out = os.fdopen(os.dup(saved[_fd(console.out)]), "w", buffering=1)  # type: ignore[index]  # guarded by the `in saved` check above: the descriptor is 1 or 2, not None
    if _fd(console.err) in saved:
        console.err = os.fdopen(os.dup(saved[_fd(console.err)]), "w", buffering=1)  # type: ignore[index]  # guarded by the `in saved` check above: the descriptor is 1 or 2, not None
    with log_path.open("ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield log_path
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os.dup2(saved[1], 1)
            os.dup2(saved[2], 2)
            for fd in saved.values():
                os.close(fd)
            for new, old in ((console.out, old_out), (console.err, old_err)):
                if new is not old:
                    with contextlib.suppress(Exception):
                        new.flush()
                        new.close()
            console.out, console.err = old_out, old_err
