"""Open transactions: their mode and the versions of what they read.

Concurrency is optimistic: a read-write transaction records the version of every
key it looks up, and its commit fails ABORTED if any of them changed meanwhile (see
:mod:`.mutations`). A transaction ends with its commit or rollback, whatever the
outcome, and expires after :data:`MAX_AGE_SECONDS` like Datastore's.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from sluice_dev.datastore.errors import invalid
from sluice_dev.datastore.keys import StoreKey

MAX_AGE_SECONDS = 270.0


@dataclass
class Transaction:
    id: bytes
    project: str
    database: str
    read_only: bool
    started: float = field(default_factory=time.monotonic)
    reads: dict[StoreKey, int] = field(default_factory=dict)
    """Key -> version seen by the first read of it in this transaction."""

    def saw(self, key: StoreKey, version: int) -> None:
        self.reads.setdefault(key, version)


class Transactions:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[bytes, Transaction] = {}

    def begin(self, project: str, database: str, *, read_only: bool) -> Transaction:
        transaction = Transaction(os.urandom(16), project, database, read_only)
        with self._lock:
            self._expire()
            self._open[transaction.id] = transaction
        return transaction

    def get(self, transaction_id: bytes, project: str) -> Transaction:
        with self._lock:
            self._expire()
            return _valid(self._open.get(transaction_id), project)

    def end(self, transaction_id: bytes, project: str) -> Transaction:
        """Remove and return the transaction (commit or rollback); only one caller
        can end a transaction."""
        with self._lock:
            self._expire()
            transaction = _valid(self._open.get(transaction_id), project)
            del self._open[transaction_id]
            return transaction

    def forget(self, project: str) -> None:
        with self._lock:
            for tid in [t for t, txn in self._open.items() if txn.project == project]:
                del self._open[tid]

    def _expire(self) -> None:
        cutoff = time.monotonic() - MAX_AGE_SECONDS
        for tid in [t for t, txn in self._open.items() if txn.started < cutoff]:
            del self._open[tid]


def _valid(transaction: Transaction | None, project: str) -> Transaction:
    if transaction is None or transaction.project != project:
        raise invalid("the referenced transaction has expired or is no longer valid")
    return transaction
