"""A dependency outage is not a failure of the pipeline.

When Cassandra (sink or checkpoint store), Kafka, Pub/Sub or Datastore is away, a batch
cannot finish, but nothing is wrong with the pipeline: exiting would only burn a new
epoch per attempt and, with ``restart.maxFailures``, end the pipeline ``Failed``
after a long enough outage. The driver instead keeps its epoch and its batch, waits
(with a capped backoff), and runs the same batch again; writes are idempotent and the
commit is fenced, so a second attempt of the same batch is safe.

:func:`dependency_of` decides, from an exception alone, whether it is an outage and
of what: by exception type name along the chain, and by text for errors that crossed
the JVM (a Spark task's Python traceback arrives as text). Anything else is a real
failure and ends the driver as before. :func:`through_outages` runs one step of the
driver again and again through an outage, telling an observer (the metrics) when a
dependency goes away and when it is back; a wait that no batch in flight depends on
ends when the driver is asked to stop (``stopping``).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

from sluice_job import logs, stopping

T = TypeVar("T")

CASSANDRA: Final = "cassandra"
KAFKA: Final = "kafka"
DATASTORE: Final = "datastore"
PUBSUB: Final = "pubsub"

# Exception class names that mean "the server is not reachable or not answering in
# time", not "the request is wrong" (an InvalidRequest stays a failure).
_CASSANDRA_NAMES: Final = (
    "NoHostAvailable",
    "Unavailable",
    "WriteTimeout",
    "ReadTimeout",
    "OperationTimedOut",
    "ConnectionShutdown",
    "CoordinationFailure",
    "OverloadedErrorMessage",
)
_KAFKA_NAMES: Final = ("KafkaUnavailableError", "DeadLetterUnavailableError")
_DATASTORE_NAMES: Final = ("ServiceUnavailable", "DeadlineExceeded", "DatastoreUnavailableError")
_PUBSUB_NAMES: Final = ("PubSubUnavailableError",)

# The same, as they appear in the text of an error raised inside a Spark task.
_TEXT: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    # cassandra.NoHostAvailable, cassandra.cluster.NoHostAvailable, the connection
    # module's cassandra.connection.ConnectionShutdown (a reset connection) and the
    # protocol module's cassandra.protocol.OverloadedErrorMessage (a node overloaded or,
    # as "Server is shutting down", being stopped).
    (
        CASSANDRA,
        re.compile(
            r"cassandra\.(cluster\.|connection\.|protocol\.)?("
            + "|".join(_CASSANDRA_NAMES)
            + r")\b"
        ),
    ),
    (
        KAFKA,
        re.compile(
            r"org\.apache\.kafka\.common\.errors\.(TimeoutException|"
            r"DisconnectException|NetworkException)"
        ),
    ),
    (DATASTORE, re.compile(r"google\.api_core\.exceptions\.(ServiceUnavailable|DeadlineExceeded)")),
)


def dependency_of(err: BaseException) -> str | None:
    """The dependency whose outage ``err`` is, or ``None`` for a real failure."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        found = _by_type(current) or _by_text(str(current))
        if found:
            return found
        current = current.__cause__ or current.__context__
    return None


def _by_type(err: BaseException) -> str | None:
    names = {kind.__name__ for kind in type(err).__mro__}
    module = type(err).__module__
    if module.startswith("cassandra") and names & set(_CASSANDRA_NAMES):
        return CASSANDRA
    if names & set(_PUBSUB_NAMES):  # before Datastore's: both are Google API errors
        return PUBSUB
    if names & set(_KAFKA_NAMES):
        return KAFKA
    if names & set(_DATASTORE_NAMES):
        return DATASTORE
    return None


def _by_text(text: str) -> str | None:
    for dependency, pattern in _TEXT:
        if pattern.search(text):
            return dependency
    return None


@dataclass(frozen=True)
class Backoff:
    """Seconds to wait before attempt ``n + 1`` of an outage: doubling from ``first``,
    capped at ``cap``, so a dependency that returns is noticed within ``cap`` seconds."""

    first: float = 0.5
    cap: float = 5.0

    def delay(self, attempt: int) -> float:
        return float(min(self.cap, self.first * 2 ** max(0, attempt - 1)))


class Watcher(Protocol):
    def dependency(self, name: str, *, available: bool, detail: str = "") -> None: ...


DETAIL_LIMIT: Final = 500


def through_outages(
    step: str,
    call: Callable[[], T],
    watcher: Watcher,
    *,
    backoff: Backoff = Backoff(),
    pause: Callable[[float], object] | None = None,
    stop: threading.Event | None = None,
) -> T:
    """``call()``, again after each outage of a dependency until it succeeds; any
    other exception propagates at once. ``step`` names what is retried in the log.
    With ``stop`` (a step no batch in flight depends on), a stop requested before an
    attempt raises ``stopping.StopRequestedError``, and cuts the wait between two short;
    ``pause`` (tests pass a fake) waits on ``stop``, else sleeps."""
    if pause is None:
        pause = stop.wait if stop is not None else time.sleep
    attempt, waiting_for = 0, ""
    while True:
        if stop is not None:
            stopping.check(stop, step)
        try:
            result = call()
        except Exception as err:
            dependency, detail = _unavailable(err, watcher)
            attempt, waiting_for = attempt + 1, dependency
            delay = backoff.delay(attempt)
            logs.event(
                "dependency unavailable",
                level=30,
                dependency=dependency,
                step=step,
                attempt=attempt,
                retry_in_s=delay,
                message=detail,
            )
            pause(delay)
            continue
        if waiting_for:
            watcher.dependency(waiting_for, available=True)
            logs.event("dependency back", dependency=waiting_for, step=step, attempts=attempt)
        return result


def _unavailable(err: Exception, watcher: Watcher) -> tuple[str, str]:
    """The dependency ``err`` says is down and its detail, told to ``watcher``; ``err``
    itself again if it names none."""
    dependency = dependency_of(err)
    if dependency is None:
        raise err
    detail = str(err)[:DETAIL_LIMIT]
    watcher.dependency(dependency, available=False, detail=detail)
    return dependency, detail


def best_effort(step: str, call: Callable[[], object], watcher: Watcher) -> bool:
    """``call()`` once, for a step a stopping driver may leave undone (its release):
    whether it was done. An outage is logged and told to ``watcher``, not waited out,
    since nothing waits on it: any other exception propagates."""
    try:
        call()
    except Exception as err:
        dependency, detail = _unavailable(err, watcher)
        logs.event(
            "dependency unavailable: left undone",
            level=30,
            dependency=dependency,
            step=step,
            message=detail,
        )
        return False
    return True
