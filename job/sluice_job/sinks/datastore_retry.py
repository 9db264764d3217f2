"""When a Datastore call is tried again, and how long to wait first.

Transient (retried with exponential backoff and jitter): ABORTED (a transaction
lost a conflict), UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL and RESOURCE_EXHAUSTED,
the codes Google documents as "retry using exponential backoff". Everything else
(INVALID_ARGUMENT, PERMISSION_DENIED, UNAUTHENTICATED, NOT_FOUND, ...) is a mistake
that waiting does not fix: it fails the batch at once.

Retrying a whole chunk transaction is safe even when a commit did take effect and
only its reply was lost: the retry reads the entities back with our own version
and writes them again, which the version rule allows and which changes nothing.
The client library's own retries are switched off (:data:`NO_RETRY`), so this
policy is the only one and its attempts are what the logs count.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from google.api_core.retry import Retry

T = TypeVar("T")

TRANSIENT: Final = frozenset(
    {"ABORTED", "UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "RESOURCE_EXHAUSTED"}
)

NO_RETRY: Final = Retry(predicate=lambda _error: False)
"""Passed to every client call: one attempt, our policy decides the next."""


def status(error: BaseException) -> str | None:
    """The gRPC status name of a client library error, if it has one."""
    code = getattr(error, "grpc_status_code", None)
    name = getattr(code, "name", None)
    return name if isinstance(name, str) else None


def is_transient(error: BaseException) -> bool:
    return status(error) in TRANSIENT


@dataclass(frozen=True)
class Backoff:
    initial: float = 0.1
    multiplier: float = 2.0
    maximum: float = 5.0
    attempts: int = 10
    """Total tries, the first included; about 25 s of waiting with the defaults."""

    def delay(self, retry: int, rng: random.Random) -> float:
        """Seconds before retry number ``retry`` (1-based): exponential, capped, with
        jitter down to half so that many writers do not retry in lockstep."""
        ceiling = min(self.maximum, self.initial * self.multiplier ** (retry - 1))
        return ceiling * rng.uniform(0.5, 1.0)


@dataclass
class Retrying:
    backoff: Backoff
    sleep: Callable[[float], None] = time.sleep
    rng: random.Random = field(default_factory=random.Random)
    retries: int = 0
    """Retries made so far, over every call."""

    def call(self, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it succeeds, a non-transient error occurs, or the
        attempts are used up; the last error is raised."""
        for tried in range(1, self.backoff.attempts + 1):
            try:
                return attempt()
            except Exception as error:
                if not is_transient(error) or tried == self.backoff.attempts:
                    raise
            self.retries += 1
            self.sleep(self.backoff.delay(tried, self.rng))
        raise AssertionError("unreachable: the last attempt returns or raises")
