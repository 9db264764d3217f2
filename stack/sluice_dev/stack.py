"""Bringing the local stack up and down, and reporting its health.

``up`` is idempotent: a server that already answers its health probe is left alone.
Servers start as soon as everything they require is healthy, so independent ones
(Kafka, Cassandra, etcd) boot in parallel. ``down`` stops servers in reverse order,
then sweeps every process still carrying the stack's marker (see ``procs``).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sluice_dev import netns, procs, registry
from sluice_dev.artifacts import Outcome
from sluice_dev.paths import Layout
from sluice_dev.provisioning import provision_all
from sluice_dev.servers.base import Server

Say = Callable[[str], None]


class StackError(RuntimeError):
    """A server failed to start or become healthy; the message names it."""


@dataclass(frozen=True)
class Health:
    server: str
    pid: int | None
    problem: str | None

    @property
    def healthy(self) -> bool:
        return self.problem is None

    def line(self) -> str:
        pid = str(self.pid) if self.pid else "-"
        state = "healthy" if self.problem is None else f"DOWN ({self.problem})"
        return f"{self.server:<26} pid {pid:<8} {state}"


def with_requirements(names: Iterable[str] | None) -> list[Server]:
    """The named servers plus everything they require, in start order; without
    names, the default stack (no optional servers)."""
    if not names:
        return list(registry.defaults())
    wanted: set[str] = set()
    stack = list(names)
    while stack:
        server = registry.server(stack.pop())
        if server.name not in wanted:
            wanted.add(server.name)
            stack.extend(server.requires)
    return [s for s in registry.SERVERS if s.name in wanted]


def provision(
    layout: Layout,
    names: Iterable[str] | None = None,
    say: Say = print,
    *,
    real_nodes: bool = False,
    monitoring: bool = False,
) -> list[Outcome]:
    """Build or fetch every artifact but those built on demand (with ``real_nodes``,
    the real nodes' too; with ``monitoring``, the monitoring servers'), or the named
    ones, downloads beside builds; prints a line as each starts and ends."""
    every = [*registry.provisioned(monitoring=monitoring)]
    if real_nodes:
        every = [*every, *(a for a in registry.ARTIFACTS if a.on_demand)]
    chosen = list(names) if names else [a.name for a in every]
    return provision_all([registry.artifact(name) for name in chosen], layout, say)


PROVISION_REAL_NODES = "sluice-dev provision --real-nodes"
"""What builds every artifact a stack with real nodes needs, on the machine's network."""


def unbuilt(layout: Layout, names: Iterable[str]) -> str | None:
    """Why the stack's network namespace cannot start servers needing ``names``: the
    artifacts among them not built yet (nothing in the namespace reaches a package
    registry, so they cannot be built there); None when every one is ready."""
    missing = [a for a in registry.every_artifact() if a.name in set(names) and not a.ready(layout)]
    if not missing:
        return None
    listed = ", ".join(f"{a.name} {a.version}" for a in missing)
    command = PROVISION_REAL_NODES
    if any(a in registry.MONITORING_ARTIFACTS for a in missing):
        command += " --monitoring"
    return (
        f"not built yet: {listed}; the stack's network namespace reaches no package "
        f"registry, so build them outside it first: {command} "
        "(make demo and make test-node do)"
    )


def health(server: Server, layout: Layout) -> Health:
    pid = procs.read_pid(layout.pidfile(server.name))
    problem = server.probe(layout) if pid else "not running"
    return Health(server.name, pid, problem)


def status(layout: Layout) -> list[Health]:
    """The health of the default stack, and of optional servers that are running."""
    return [
        health(server, layout)
        for server in registry.SERVERS
        if not server.optional or procs.read_pid(layout.pidfile(server.name))
    ]


def up(layout: Layout, names: Iterable[str] | None = None, say: Say = print) -> None:
    servers = with_requirements(names)
    needed = {a for s in servers for a in s.artifacts}
    if netns.inside(layout):
        if problem := unbuilt(layout, needed):
            raise StackError(problem)
    else:
        provision(layout, [a.name for a in registry.every_artifact() if a.name in needed], say)
    _Starter(layout, servers, say).run()


def stop(layout: Layout, name: str, *, kill: bool = False) -> None:
    """Stop one server (not what requires it): SIGTERM, or SIGKILL at once (a crash)."""
    server = registry.server(name)
    pid = procs.read_pid(layout.pidfile(name))
    if pid:
        procs.terminate([pid], grace=0.0 if kill else server.stop_grace)
    layout.pidfile(name).unlink(missing_ok=True)


def restart(
    layout: Layout, name: str, *, down_seconds: float = 0.0, kill: bool = False, say: Say = print
) -> float:
    """Stop one server, keep it down ``down_seconds``, start it again with its data and
    wait until it is healthy: a dependency outage for fault tests and the soak.
    Returns the seconds from the stop to healthy again."""
    began = time.monotonic()
    stop(layout, name, kill=kill)
    say(f"{name:<26} {'killed' if kill else 'stopped'}")
    time.sleep(max(0.0, down_seconds - (time.monotonic() - began)))
    up(layout, [name], say)
    return time.monotonic() - began


def down(layout: Layout, say: Say = print, *, purge: bool = False) -> None:
    for server in reversed(registry.SERVERS):
        if procs.read_pid(layout.pidfile(server.name)):
            stop(layout, server.name)
            say(f"{server.name:<26} stopped")
    leftovers = list(procs.marked_pids(layout.stack))
    if leftovers:
        procs.terminate(leftovers, grace=5)
        say(f"swept {len(leftovers)} leftover process(es)")
    for server in reversed(registry.SERVERS):
        server.cleanup(layout)
    if purge:
        netns.remove(netns.name(layout))
        for sub in ("data", "conf", "run"):
            shutil.rmtree(layout.stack / sub, ignore_errors=True)
        say(f"purged {layout.stack}")


def exports(layout: Layout) -> dict[str, str]:
    values = {"SLUICE_STACK_DIR": str(layout.stack)}
    for server in registry.SERVERS:
        values.update(server.exports(layout))
    return values


class _Starter:
    """Starts servers once their requirements are healthy and waits for each."""

    def __init__(self, layout: Layout, servers: Sequence[Server], say: Say) -> None:
        self.layout, self.servers, self.say = layout, servers, say
        self.healthy: set[str] = set()
        self.started: dict[str, float] = {}

    def run(self) -> None:
        for server in self.servers:
            if health(server, self.layout).healthy:
                self.healthy.add(server.name)
                self.say(f"{server.name:<26} already up")
        while len(self.healthy) < len(self.servers):
            self._start_ready()
            self._check_started()
            time.sleep(0.3)

    def _start_ready(self) -> None:
        for server in self.servers:
            if server.name in self.healthy or server.name in self.started:
                continue
            if all(req in self.healthy for req in server.requires):
                self._spawn(server)

    def _spawn(self, server: Server) -> None:
        layout = self.layout
        stale = procs.read_pid(layout.pidfile(server.name))
        if stale:
            procs.terminate([stale], grace=server.stop_grace)
        server.prepare(layout)
        env = {**os.environ, **procs.marker_env(layout.stack), **server.env(layout)}
        procs.spawn(
            server.argv(layout),
            log=layout.log(server.name),
            pidfile=layout.pidfile(server.name),
            env=env,
            cwd=server.cwd(layout),
        )
        self.started[server.name] = time.monotonic()

    def _check_started(self) -> None:
        for name, since in list(self.started.items()):
            if name in self.healthy:
                continue
            server = registry.server(name)
            state = health(server, self.layout)
            elapsed = time.monotonic() - since
            if state.healthy:
                self.healthy.add(name)
                self.say(f"{name:<26} up in {elapsed:5.1f}s")
            elif state.pid is None:
                raise StackError(f"{name} exited during start-up; see {self._tail(name)}")
            elif elapsed > server.start_timeout:
                raise StackError(
                    f"{name} not healthy after {server.start_timeout:.0f}s: {state.problem}; "
                    f"see {self._tail(name)}"
                )

    def _tail(self, name: str) -> str:
        log = self.layout.log(name)
        try:
            lines = log.read_text(errors="replace").splitlines()[-15:]
        except OSError:
            return str(log)
        return f"{log}:\n" + "\n".join(lines)
