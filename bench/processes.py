"""Child processes of the benchmark (the two contenders) and their JSON-lines files.

Each child runs in its own session (process group), so stopping it also reaches the
Spark JVM and the Python workers it started. A clean stop is SIGTERM (both children
finish their batch in flight and exit); whatever is left after the grace period is
killed, group-wide.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice_dev.paths import REPO_ROOT

Event = dict[str, Any]


@dataclass
class JsonLines:
    """Reads the JSON objects appended to a file since the last read; other lines
    (a JVM's log output, say) and a last line still being written are skipped."""

    path: Path
    _offset: int = 0

    def read_new(self) -> list[Event]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self._offset += len(complete)
        return [e for e in map(_parse, complete.decode(errors="replace").splitlines()) if e]


def _parse(line: str) -> Event | None:
    if not line.startswith("{"):
        return None
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


@dataclass
class Child:
    """A started child process and its combined stdout/stderr log."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(
        cls, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path
    ) -> Child:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as out:
            proc = subprocess.Popen(
                list(argv),
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
            )
        return cls(name, proc, log)

    def exited(self) -> int | None:
        return self.proc.poll()

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, grace: float) -> int:
        """SIGTERM, then up to ``grace`` seconds to exit; killed otherwise."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.kill()
        self._kill_group()
        return self.proc.wait()

    def kill(self) -> None:
        self._kill_group()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)

    def _kill_group(self) -> None:
        """Leftovers of the child's own process group (a JVM, Python workers)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def start_driver(
    spec: Mapping[str, Any],
    pipeline: str,
    workdir: Path,
    extra_env: Mapping[str, str] | None = None,
) -> Child:
    """A real driver (``python -m sluice_job``, epoch 1, namespace and cluster
    ``bench``) running ``spec`` as pipeline ``pipeline``, its log in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
        "SLUICE_CONFIG": json.dumps(spec),
        "SLUICE_PIPELINE": pipeline,
        "SLUICE_NAMESPACE": "bench",
        "SLUICE_CLUSTER_ID": "bench",
        "SLUICE_EPOCH": "1",
        "SLUICE_TERMINATION_LOG": str(workdir / "termination.json"),
        **(extra_env or {}),
    }
    argv = [sys.executable, "-m", "sluice_job"]
    return Child.start("driver", argv, env, workdir / "driver.log", workdir)
