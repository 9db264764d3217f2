"""Local processes standing in for containers.

Each container instance is one process started in its own session, so its process
group id is its pid and everything it forks stays in that group; stdout and stderr go
to a log file. Stopping follows a container runtime, not a shell: :meth:`Process.stop`
sends SIGTERM to the main process only (a runtime signals PID 1; a PySpark driver must
get the chance to stop its JVM child itself) and :meth:`Process.kill` SIGKILLs the whole
group. When the main process exits, whatever is left in its group is SIGKILLed, as
when a container's PID 1 dies. Exit codes are reported as a runtime does: death by
signal N is ``128 + N``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sluice_dev.nodeagent.clock import now
from sluice_dev.nodeagent.podspec import LaunchPlan


@dataclass
class Process:
    """One running (or finished) container instance."""

    popen: subprocess.Popen[bytes]
    started_at: datetime = field(default_factory=now)
    exit_code: int | None = None
    finished_at: datetime | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        """Reap the main process if it exited; then clear out its process group."""
        if self.exit_code is None:
            code = self.popen.poll()
            if code is None:
                return None
            self.exit_code = 128 - code if code < 0 else code
            self.finished_at = now()
            _signal_group(self.pid, signal.SIGKILL)
        return self.exit_code

    def stop(self) -> None:
        """SIGTERM to the main process (a graceful stop)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.popen.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the whole process group, then reap the main process."""
        _signal_group(self.pid, signal.SIGKILL)
        if self.exit_code is None:
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                return
            self.poll()


def start(plan: LaunchPlan, log: Path) -> Process:
    """Start ``plan``; raises ``OSError`` if it cannot be executed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    plan.cwd.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(plan.argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(plan.env),
            cwd=plan.cwd,
            start_new_session=True,
        )
    return Process(popen)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
