"""What the stack needs to know to run one server: its artifact, how to prepare
its configuration, its command line, and a health probe with a start deadline."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sluice_dev.paths import Layout

Probe = Callable[[Layout], str | None]
"""Returns ``None`` when the server is healthy, else a short reason why not."""


@dataclass(frozen=True)
class Server:
    name: str
    argv: Callable[[Layout], Sequence[str]]
    probe: Probe
    requires: tuple[str, ...] = ()
    artifacts: tuple[str, ...] = ()
    prepare: Callable[[Layout], None] = lambda _layout: None
    cleanup: Callable[[Layout], None] = lambda _layout: None
    """What ``down`` undoes after the processes are gone: what the server made that
    outlives it (a real node's containers, mounts and network namespace)."""
    env: Callable[[Layout], Mapping[str, str]] = lambda _layout: {}
    exports: Callable[[Layout], Mapping[str, str]] = lambda _layout: {}
    """Environment a client of this server needs (printed by ``sluice-dev env``)."""
    cwd: Callable[[Layout], Path | None] = lambda _layout: None
    start_timeout: float = 120.0
    stop_grace: float = 15.0
    tags: frozenset[str] = field(default_factory=frozenset)
    optional: bool = False
    """Started only when named (``sluice-dev up NAME``, a fixture), never as part of
    the whole stack; ``status`` reports it only while it runs."""
