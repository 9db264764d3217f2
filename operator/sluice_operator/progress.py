"""A running driver's progress, read from its own ``/metrics`` endpoint.

The operator shows the last commit in the pipeline's status (``kubectl get sp``)
while the driver runs, not only when it exits. It asks the driver, the way the
Flink operator asks a JobManager's REST API: the driver already serves
``sluice_last_committed_batch_id``, ``sluice_last_commit_timestamp_seconds``,
``sluice_epoch`` and ``sluice_consumer_lag`` for Prometheus. The alternative, the
operator reading the checkpoint row, would give it Cassandra credentials and a
Cassandra client; the driver needs no Kubernetes credentials either way.

:func:`parse` is pure; :func:`scrape` is the one HTTP GET. A scrape that fails
(driver starting, network; or a driver that redirects, answers too much or too
slowly: it runs a tenant's image, and is read with a size cap and one deadline)
gives ``None``: the status keeps what it had. Answers
from another epoch's driver are ignored by the caller (a zombie on the same address
during a failover on a shared host).
"""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from sluice_api import metrics as names

TIMEOUT_SECONDS: Final = 1.0
"""For the whole scrape: connecting, asking and reading the body."""
MAX_BYTES: Final = 4 * 1024 * 1024
"""A driver's exposition is a few kilobytes per partition; past this it is refused."""
CHUNK: Final = 64 * 1024
BATCH: Final = names.LAST_COMMITTED_BATCH
COMMITTED_AT: Final = names.LAST_COMMIT_TIMESTAMP
EPOCH: Final = names.EPOCH
LAG: Final = names.CONSUMER_LAG


@dataclass(frozen=True)
class DriverProgress:
    """What a driver reports about itself."""

    epoch: int
    batch_id: int | None
    """The last batch it committed; ``None`` before its first commit."""
    committed_at: datetime | None
    lag: int | None
    """Records in Kafka past the committed positions, summed over partitions; for a
    Pub/Sub source, the messages it holds unacknowledged."""
    oldest_age: int | None = None
    """Pub/Sub: seconds since the oldest message it holds was published."""
    unavailable: tuple[str, ...] = ()
    """Dependencies the driver is waiting for (``sluice_dependency_available`` 0)."""
    lost: tuple[tuple[str, int], ...] = ()
    """Records retention deleted before they were read, per ``topic/partition``."""
    resets: tuple[OffsetReset, ...] = ()
    """Partitions whose checkpoint was beyond their end (a recreated topic)."""
    standby_ready: bool = False
    """A standby (warm handover) says it is ready to take over."""


@dataclass(frozen=True)
class OffsetReset:
    """A partition read again from its earliest offset because the checkpoint was
    beyond its end, as the driver's ``sluice_offset_reset*`` series report it."""

    where: str
    """``topic/partition``."""
    times: int
    committed: int
    """The committed offset of the last reset."""
    resumed_at: int


def parse(text: str, pipeline: str) -> DriverProgress | None:
    """The progress of ``pipeline`` (``namespace/name``, the drivers' ``pipeline``
    label) in a Prometheus text exposition; ``None`` if it has no epoch for it (not
    its driver, or one that has not claimed the pipeline yet)."""
    values: dict[str, float] = {}
    lag: float | None = None
    unavailable: set[str] = set()
    lost: dict[str, int] = {}
    resets: dict[str, dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("pipeline") != pipeline:
                continue
            if sample.name in (LAG, names.PUBSUB_HELD):
                lag = (lag or 0.0) + sample.value
            elif sample.name == names.PUBSUB_OLDEST_AGE:
                values[sample.name] = sample.value
            elif sample.name == names.RECORDS_SKIPPED + "_total" and sample.value > 0:
                where = f"{sample.labels.get('topic')}/{sample.labels.get('partition')}"
                lost[where] = int(sample.value)
            elif sample.name in RESET_SERIES:
                where = f"{sample.labels.get('topic')}/{sample.labels.get('partition')}"
                resets.setdefault(where, {})[sample.name] = int(sample.value)
            elif sample.name == names.DEPENDENCY_AVAILABLE and sample.value == 0:
                unavailable.add(sample.labels.get(names.DEPENDENCY_LABEL, "unknown"))
            elif sample.name in (BATCH, COMMITTED_AT, EPOCH, names.STANDBY_READY):
                values[sample.name] = sample.value
    epoch = values.get(EPOCH)
    if not epoch:
        return None
    batch = values.get(BATCH)
    stamp = values.get(COMMITTED_AT)
    committed = batch is not None and batch > 0 and stamp is not None and stamp > 0
    return DriverProgress(
        epoch=int(epoch),
        batch_id=int(batch) if committed and batch is not None else None,
        committed_at=(
            datetime.fromtimestamp(stamp, UTC) if committed and stamp is not None else None
        ),
        lag=None if lag is None else int(lag),
        oldest_age=int(values[names.PUBSUB_OLDEST_AGE])
        if names.PUBSUB_OLDEST_AGE in values
        else None,
        unavailable=tuple(sorted(unavailable)),
        lost=tuple(sorted(lost.items())),
        resets=tuple(_reset(where, values) for where, values in sorted(resets.items())),
        standby_ready=values.get(names.STANDBY_READY) == 1,
    )


RESET_SERIES: Final = (
    names.OFFSET_RESETS + "_total",
    names.OFFSET_RESET_FROM,
    names.OFFSET_RESET_TO,
)


def _reset(where: str, values: dict[str, int]) -> OffsetReset:
    return OffsetReset(
        where,
        values.get(names.OFFSET_RESETS + "_total", 0),
        values.get(names.OFFSET_RESET_FROM, 0),
        values.get(names.OFFSET_RESET_TO, 0),
    )


def scrape(
    host: str, port: int, pipeline: str, timeout: float = TIMEOUT_SECONDS
) -> DriverProgress | None:
    """GET ``http://host:port/metrics`` and parse it; ``None`` on any failure."""
    text = fetch(host, port, timeout)
    if text is None:
        return None
    try:
        return parse(text, pipeline)
    except ValueError:
        return None


def fetch(host: str, port: int, timeout: float, limit: int = MAX_BYTES) -> str | None:
    """The body of ``GET /metrics``, read with distrust: the driver runs a tenant's
    image, and one operator serves every pipeline. One deadline for the whole exchange
    (a server trickling a byte at a time cannot hold a reconcile thread longer), at
    most ``limit`` bytes, no redirect followed, anything but 200 refused; ``None`` then."""
    deadline = time.monotonic() + timeout
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", "/metrics", headers={"Accept": "text/plain"})
        _restrict(connection, deadline)
        response = connection.getresponse()
        if response.status != HTTPStatus.OK:
            return None
        declared = response.getheader("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            _restrict(connection, deadline)
            chunk = response.read1(CHUNK)
            if not chunk:
                break
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        connection.close()


def _restrict(connection: http.client.HTTPConnection, deadline: float) -> None:
    """The next socket operation may take what is left of the deadline, no more."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("the driver's /metrics took longer than the deadline")
    if connection.sock is not None:
        connection.sock.settimeout(left)
