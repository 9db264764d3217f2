"""An exclusive lock beside a file or directory, shared by every process on the machine.

The provisioning cache and the node agent's image registry are written by several
processes at once (a CI rehearsal beside a working copy; several agents); each
holds ``<path>.lock`` with ``flock`` while it reads and writes ``path``.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``path`` (the file ``<path>.lock``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.with_name(path.name + ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
