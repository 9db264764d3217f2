"""A running driver's progress, read from its own ``/metrics`` endpoint.

The operator shows the last commit in the pipeline's status (``kubectl get sp``)
while the driver runs, not only when it exits. It asks the driver, the way the
Flink operator asks a JobManager's REST API: the driver already serves
``sluice_last_committed_batch_id``, ``sluice_last_commit_timestamp_seconds``,
``sluice_epoch`` and ``sluice_consumer_lag`` for Prometheus, the last batch and its
time from its claim of the checkpoint on (``reports.follow``). The alternative, the
operator reading the checkpoint row, would give it Cassandra credentials and a
Cassandra client; the driver needs no Kubernetes credentials either way.

:func:`parse` is pure; :func:`scrape` is the one HTTP GET (``scrapeget``). A scrape
that fails (driver starting, network; or a driver that redirects, answers too much or
too slowly: it runs a tenant's image, and is read with a size cap and one deadline for
the whole exchange) gives ``None``: the status keeps what it had. Only the pipeline's
own ``sluice_`` samples are parsed, at most :data:`MAX_SAMPLES`, and a value that is
not a finite number (``+Inf``, ``NaN``) counts as absent. Answers
from another epoch's driver are ignored by the caller (a zombie on the same address
during a failover on a shared host).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from sluice_api import metrics as names
from sluice_operator import scrapeget

TIMEOUT_SECONDS: Final = 1.0
"""For the whole scrape: connecting, asking and reading the body."""
MAX_BYTES: Final = 4 * 1024 * 1024
"""A driver's exposition is a few kilobytes per partition; past this it is refused."""
PREFIX: Final = "sluice_"
FAMILY_LINES: Final = (f"# HELP {PREFIX}", f"# TYPE {PREFIX}")
MAX_SAMPLES: Final = 10_000
"""A pipeline's own samples: one per partition (its lag), four where records were
lost and its offsets reset, so 2,500 to 10,000 partitions; a driver reporting more is
not read. Parsing this many costs about 0.3 s of CPU (4 MiB of every series: 2.1-2.5 s
before only the pipeline's own were parsed)."""
MAX_LABEL: Final = 256
"""A label value read from a driver (a topic, a dependency) is cut to this: Kafka's
topic names are at most 249 characters, and the value reaches the status."""
MAX_NAMED: Final = 16
"""Dependencies a driver may name as unavailable (it has four or five); more are not
read."""
BATCH: Final = names.LAST_COMMITTED_BATCH
COMMITTED_AT: Final = names.LAST_COMMIT_TIMESTAMP
EPOCH: Final = names.EPOCH
LAG: Final = names.CONSUMER_LAG
COMMITS: Final = names.BATCHES + "_total"


@dataclass(frozen=True)
class DriverProgress:
    """What a driver reports about itself."""

    epoch: int
    batch_id: int | None
    """The checkpoint's last batch as it knows it (its own last commit, or the one it
    found when it claimed); ``None`` before its claim, or with nothing committed."""
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
    commits: int | None = None
    """Batches this driver committed (``sluice_batches_total``); ``None`` where not
    read. ``batch_id`` alone does not say it: from its claim it is the checkpoint's,
    possibly an older epoch's."""
    claimed: bool = False
    """It has claimed the pipeline and says what the checkpoint holds (``batch_id``
    ``None``: nothing committed): from its claim on, it reports the checkpoint's last
    batch, whichever epoch committed it. ``False`` before its claim, and from a driver
    older than these reports until its first commit."""


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
            if sample.labels.get("pipeline") != pipeline or not math.isfinite(sample.value):
                continue
            if sample.name in (LAG, names.PUBSUB_HELD):
                lag = (lag or 0.0) + sample.value
            elif sample.name == names.PUBSUB_OLDEST_AGE:
                values[sample.name] = sample.value
            elif sample.name == names.RECORDS_SKIPPED + "_total" and sample.value > 0:
                lost[_where(sample.labels)] = int(sample.value)
            elif sample.name in RESET_SERIES:
                resets.setdefault(_where(sample.labels), {})[sample.name] = int(sample.value)
            elif sample.name == names.DEPENDENCY_AVAILABLE and sample.value == 0:
                if len(unavailable) < MAX_NAMED:
                    name = sample.labels.get(names.DEPENDENCY_LABEL, "unknown")
                    unavailable.add(name[:MAX_LABEL])
            elif sample.name in (BATCH, COMMITTED_AT, EPOCH, names.STANDBY_READY, COMMITS):
                values[sample.name] = sample.value
    epoch = values.get(EPOCH)
    if not epoch:
        return None
    batch = values.get(BATCH)
    stamp = values.get(COMMITTED_AT)
    batch_id = int(batch) if batch is not None and batch > 0 else None
    known_time = batch_id is not None and stamp is not None and stamp > 0
    return DriverProgress(
        epoch=int(epoch),
        batch_id=batch_id,
        committed_at=datetime.fromtimestamp(stamp, UTC) if known_time and stamp else None,
        lag=None if lag is None else int(lag),
        oldest_age=int(values[names.PUBSUB_OLDEST_AGE])
        if names.PUBSUB_OLDEST_AGE in values
        else None,
        unavailable=tuple(sorted(unavailable)),
        lost=tuple(sorted(lost.items())),
        resets=tuple(_reset(where, values) for where, values in sorted(resets.items())),
        standby_ready=values.get(names.STANDBY_READY) == 1,
        commits=int(values[COMMITS]) if COMMITS in values else None,
        claimed=batch is not None,
    )


def _where(labels: dict[str, str]) -> str:
    """``topic/partition`` of a sample, each cut to ``MAX_LABEL``."""
    return f"{labels.get('topic', '')[:MAX_LABEL]}/{labels.get('partition', '')[:MAX_LABEL]}"


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
    return read(host, port, pipeline, timeout)[1]


def read(
    host: str, port: int, pipeline: str, timeout: float = TIMEOUT_SECONDS
) -> tuple[scrapeget.Outcome, DriverProgress | None]:
    """:func:`scrape`, saying how the exchange went: an answer that is not a usable
    exposition (too many samples, a malformed line) is the driver misbehaving; one
    without this pipeline's epoch (not claimed yet) is an answer."""
    reply = scrapeget.get_reply(host, port, "/metrics", timeout, MAX_BYTES)
    if reply.body is None:
        return reply.outcome, None
    own = relevant(reply.body.decode("utf-8", errors="replace"), pipeline)
    if own is None:
        return scrapeget.Outcome.MISBEHAVED, None
    try:
        return reply.outcome, parse(own, pipeline)
    except (ValueError, OverflowError):  # a malformed line; a value no int can hold
        return scrapeget.Outcome.MISBEHAVED, None


def fetch(host: str, port: int, timeout: float, limit: int = MAX_BYTES) -> str | None:
    """The body of ``GET /metrics``, read with distrust (``scrapeget``): the driver
    runs a tenant's image, and one operator serves every pipeline. One deadline for
    the whole exchange, at most ``limit`` bytes, no redirect followed, anything but 200
    refused; ``None`` then."""
    body = scrapeget.get(host, port, "/metrics", timeout, limit)
    return None if body is None else body.decode("utf-8", errors="replace")


def relevant(text: str, pipeline: str) -> str | None:
    """Only the lines :func:`parse` can use: the ``sluice_`` families' HELP and TYPE
    lines and their samples labelled with ``pipeline``. Whatever else a driver serves
    (another library's series, a tenant's own) is never parsed, so its size costs the
    operator a line split, not a parse. ``None`` past :data:`MAX_SAMPLES` samples."""
    label = f'pipeline="{pipeline}"'
    kept: list[str] = []
    samples = 0
    for line in text.splitlines():
        if line.startswith(FAMILY_LINES):
            kept.append(line)
        elif line.startswith(PREFIX) and label in line:
            samples += 1
            if samples > MAX_SAMPLES:
                return None
            kept.append(line)
    return "\n".join(kept) + "\n"
