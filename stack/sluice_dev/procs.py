"""Starting, finding and stopping the stack's processes.

Every process the stack starts carries ``SLUICE_STACK=<stack dir>`` in its
environment, and children inherit it: pods run by the node agent, the JVMs Spark
forks, anything. ``down`` therefore finds every process of a stack by reading
``/proc/*/environ`` rather than trusting pid files alone, so nothing is left behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

MARKER = "SLUICE_STACK"


def marker_env(stack_dir: Path) -> dict[str, str]:
    return {MARKER: str(stack_dir)}


def spawn(
    argv: Sequence[str],
    *,
    log: Path,
    pidfile: Path,
    env: Mapping[str, str],
    cwd: Path | None = None,
) -> int:
    """Start ``argv`` detached in its own session, appending output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pidfile.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    pidfile.write_text(f"{proc.pid}\n")
    return proc.pid


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pid(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def marked_pids(stack_dir: Path) -> Iterator[int]:
    """Pids of live processes whose environment names this stack."""
    needle = f"{MARKER}={stack_dir}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0") and pid_alive(int(entry.name)):
            yield int(entry.name)


def terminate(pids: Sequence[int], *, grace: float) -> None:
    """SIGTERM ``pids`` and their process groups, SIGKILL what outlives ``grace``."""
    _signal_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.1)
    _signal_all([p for p in pids if pid_alive(p)], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_alive(p) for p in pids):
        time.sleep(0.05)


def _signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        for send in (os.killpg, os.kill):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                send(pid, sig)
