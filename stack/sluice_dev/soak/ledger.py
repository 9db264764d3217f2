"""What the producer did with every sequence number: committed, aborted, or (rarely)
unknown, one transaction at a time, and what the pipeline must make of each record.

Pure bookkeeping. A transaction covers a run of consecutive sequence numbers, so the
ledger stores runs, not numbers: half a million events are a few thousand entries.
An outcome is *unknown* only when the producer failed fatally inside
``commit_transaction``; :meth:`Ledger.resolve` settles those from a read of the topic
with ``read_committed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from sluice_dev.events import EventFactory


class Outcome(StrEnum):
    COMMITTED = "committed"
    ABORTED = "aborted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Transaction:
    first: int
    end: int
    """One past the last sequence number."""
    outcome: Outcome

    @property
    def seqs(self) -> range:
        return range(self.first, self.end)


@dataclass
class Ledger:
    transactions: list[Transaction] = field(default_factory=list)

    def record(self, first: int, end: int, outcome: Outcome) -> None:
        self.transactions.append(Transaction(first, end, outcome))

    def seqs(self, outcome: Outcome) -> Iterator[int]:
        for txn in self.transactions:
            if txn.outcome is outcome:
                yield from txn.seqs

    def count(self, outcome: Outcome) -> int:
        return sum(len(t.seqs) for t in self.transactions if t.outcome is outcome)

    def resolve(self, visible: Iterable[int]) -> int:
        """Settle unknown transactions: committed if any of their records is visible to
        a ``read_committed`` reader, else aborted. Returns how many were settled."""
        seen = set(visible)
        settled = 0
        for i, txn in enumerate(self.transactions):
            if txn.outcome is Outcome.UNKNOWN:
                committed = any(seq in seen for seq in txn.seqs)
                outcome = Outcome.COMMITTED if committed else Outcome.ABORTED
                self.transactions[i] = Transaction(txn.first, txn.end, outcome)
                settled += 1
        return settled


@dataclass(frozen=True)
class Expectation:
    """What the pipeline must make of the produced records (a pure derivation)."""

    valid: frozenset[int]
    """Committed, well-formed: each exactly once in the sink."""
    rejected: dict[int, str]
    """Committed, malformed: each in the dead-letter topic with this reason."""
    aborted: frozenset[int]
    """Aborted: in neither."""


def expectation(ledger: Ledger, factory: EventFactory) -> Expectation:
    committed = list(ledger.seqs(Outcome.COMMITTED))
    return Expectation(
        valid=frozenset(s for s in committed if not factory.is_bad(s)),
        rejected={s: reject_reason(factory, s) for s in committed if factory.is_bad(s)},
        aborted=frozenset(ledger.seqs(Outcome.ABORTED)),
    )


def reject_reason(factory: EventFactory, seq: int) -> str:
    """The reason the example transform gives for malformed record ``seq``: the three
    kinds :meth:`EventFactory.record` makes, as ``sluice_job.examples.ui_events``
    documents its reasons."""
    kind = (seq // max(1, factory.bad_every)) % 3
    return (
        "malformed JSON",
        "missing field page",
        "wrong type of ts: expected integer, got string",
    )[kind]
