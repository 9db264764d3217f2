"""Keeping the leases of held messages alive while their batch runs.

A pulled message is leased to the driver until its ack deadline; if the batch takes
longer, Pub/Sub delivers the message again (to this driver or another subscriber).
That is harmless for correctness (the repeat is recognised by its id, ``spool``) but
wasteful, so a thread renews the lease of every message the driver holds, every
third of ``source.pubsub.ackDeadlineSeconds``, from the moment it is pulled until it
is acknowledged or given back. A renewal that fails is logged and tried again at the
next tick: a lost lease only costs a redelivery, never a message.

On a clean stop, messages pulled but not in a committed batch are given back
(deadline 0), so the next driver gets them at once instead of after their lease.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sluice_job import logs


class Lessor(Protocol):
    def extend(self, ack_ids: Sequence[str], seconds: int) -> None: ...


@dataclass
class Leases:
    lessor: Lessor
    seconds: int
    """The lease asked for at each renewal."""
    _held: dict[str, None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _wake: threading.Event = field(default_factory=threading.Event)
    _closed: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    renewals: int = 0
    failures: int = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sluice-leases", daemon=True)
        self._thread.start()

    def hold(self, ack_ids: Iterable[str]) -> None:
        """Renew these leases from now on (the first renewal comes at once)."""
        with self._lock:
            self._held.update(dict.fromkeys(a for a in ack_ids if a))
        self._wake.set()

    def forget(self, ack_ids: Iterable[str]) -> None:
        """Stop renewing these (acknowledged, or given back)."""
        with self._lock:
            for ack_id in ack_ids:
                self._held.pop(ack_id, None)

    @property
    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def close(self, *, give_back: bool) -> None:
        """Stop renewing; with ``give_back`` the held messages' leases end now."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            held, self._held = list(self._held), {}
        if give_back and held:
            try:
                self.lessor.extend(held, 0)
                logs.event("messages given back", messages=len(held))
            except Exception as err:  # they come back when their leases end anyway
                logs.event("messages not given back", level=30, message=str(err)[:500])

    def _run(self) -> None:
        interval = max(1.0, self.seconds / 3)
        while not self._closed.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._closed.is_set():
                return
            with self._lock:
                held = list(self._held)
            if held:
                self._renew(held)

    def _renew(self, ack_ids: list[str]) -> None:
        try:
            self.lessor.extend(ack_ids, self.seconds)
            self.renewals += 1
        except Exception as err:  # a lost lease costs a redelivery, never a message
            self.failures += 1
            logs.event(
                "lease renewal failed",
                level=30,
                messages=len(ack_ids),
                message=str(err)[:500],
            )
