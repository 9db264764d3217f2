"""The Google Cloud Datastore sink: entities upserted from the Spark executors with
the ``google-cloud-datastore`` client.

Keys come from the output's ``__key__`` column and every other column becomes a
property (the contract is in ``datastore_entities``). Rows leave the JVM in Arrow
batches (``mapInArrow``, see ``arrow_rows``). Each executor partition takes its rows
in chunks of at most 500 distinct keys (Datastore's limit per commit), and writes
every chunk in its own transaction: look the keys up, drop the entities whose stored
write version is newer than ours (a fenced driver's late write must not win, see
``datastore_writes``), put the rest with our version in ``_sluice_version``, commit.
With ``spec.sink.orderColumn`` each entity's version is its own (``ordered``), so
the compare keeps the latest event of a key whatever the order of the batches.
A conflicting writer makes the commit fail ABORTED and the chunk is tried again
from the lookup, so the comparison and the write are atomic. Up to
``sink.datastore.concurrency`` chunks of a partition are in flight at once; a chunk
that shares a key with one in flight waits for it, so the later row of a key still
wins (``datastore_flight``).

Transient errors are retried with backoff (``datastore_retry``); any other error,
or transient ones past the last attempt, fail the batch with a message naming the
kind and the project. The client honours ``DATASTORE_EMULATOR_HOST`` (an insecure
gRPC channel, no credentials); otherwise it authenticates with the service account
of ``datastore_credentials`` or Application Default Credentials.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Final

import pyarrow as pa
from google.api_core.exceptions import GoogleAPICallError
from google.auth.credentials import AnonymousCredentials
from google.auth.exceptions import DefaultCredentialsError
from google.cloud import datastore
from pyspark.sql import DataFrame

from sluice_api.sink import DATASTORE_WRITE_CONCURRENCY
from sluice_api.sink import DatastoreSink as DatastoreSpec
from sluice_job import keys, logs
from sluice_job.sinks import ordered
from sluice_job.sinks.arrow_rows import rows
from sluice_job.sinks.datastore_credentials import ServiceAccount
from sluice_job.sinks.datastore_entities import (
    KEY_COLUMN,
    VERSION_PROPERTY,
    BadKeyError,
    EntityShape,
    Ident,
    shape,
    unindexed,
)
from sluice_job.sinks.datastore_flight import Flight
from sluice_job.sinks.datastore_retry import NO_RETRY, Backoff, Retrying, is_transient, status
from sluice_job.sinks.datastore_writes import chunks, supersedes

EMULATOR_ENV: Final = "DATASTORE_EMULATOR_HOST"
PROBE_KEY: Final = "sluice-probe"

HINTS: Final[Mapping[str, str]] = {
    "PERMISSION_DENIED": "grant the service account the Cloud Datastore User role",
    "UNAUTHENTICATED": "check the key in sink.datastore.credentialsSecret",
    "NOT_FOUND": "check that the project exists and has a Datastore database",
    "INVALID_ARGUMENT": "an entity breaks a Datastore limit; fix the transform's output",
    "FAILED_PRECONDITION": "the project's database is not in Datastore mode or not ready",
}


class DatastoreWriteError(RuntimeError):
    """A batch could not be written; the message names the kind, the project and
    the status, and says what to do."""


@dataclass(frozen=True)
class DatastoreTarget:
    """Everything an executor needs to write; picklable, sent with the task."""

    project: str
    kind: str
    namespace: str | None
    credentials: ServiceAccount | None
    emulator_host: str | None
    backoff: Backoff = field(default_factory=Backoff)
    timeout: float = 30.0
    """Seconds per call."""
    concurrency: int = DATASTORE_WRITE_CONCURRENCY
    """Commits in flight per Spark task."""

    @classmethod
    def from_spec(cls, sink: DatastoreSpec, env: Mapping[str, str]) -> DatastoreTarget:
        emulator = env.get(EMULATOR_ENV) or None
        credentials = None if emulator else ServiceAccount.from_env(env)
        return cls(
            sink.project,
            sink.kind,
            sink.namespace,
            credentials,
            emulator,
            concurrency=sink.concurrency,
        )

    def where(self) -> str:
        namespace = f", namespace {self.namespace!r}" if self.namespace else ""
        return f"Datastore kind {self.kind!r} in project {self.project!r}{namespace}"


@dataclass(frozen=True)
class WriteResult:
    """What one partition (or, summed, one batch) did."""

    rows: int = 0
    written: int = 0
    skipped: int = 0
    """Entities left alone because a newer version was stored."""
    chunks: int = 0
    """Transactions, one per chunk of at most 500 entities (one commit unless every
    entity of the chunk was skipped)."""
    retries: int = 0
    error: str | None = None

    def __add__(self, other: WriteResult) -> WriteResult:
        return WriteResult(
            self.rows + other.rows,
            self.written + other.written,
            self.skipped + other.skipped,
            self.chunks + other.chunks,
            self.retries + other.retries,
            self.error or other.error,
        )


RESULT_SCHEMA: Final = (
    "rows long, written long, skipped long, chunks long, retries long, error string"
)
"""What each partition's write reports back to the driver, a :class:`WriteResult`."""
_RESULT_ARROW: Final = pa.schema(
    [(name, pa.int64()) for name in ("rows", "written", "skipped", "chunks", "retries")]
    + [("error", pa.string())]
)


class DatastoreSink:
    def __init__(
        self, target: DatastoreTarget, *, probe: bool = True, order: str | None = None
    ) -> None:
        self.target = target
        self.order = order
        """``spec.sink.orderColumn``: each entity carries its own version
        (``sinks.ordered``); ``None``: the batch's."""
        self.last = WriteResult()
        if probe:
            self.probe()

    def probe(self) -> None:
        """Fail fast, before any batch, on bad credentials or an unreachable service."""
        retrying = Retrying(self.target.backoff)
        try:
            client = connect(self.target)
        except DefaultCredentialsError as err:
            raise DatastoreWriteError(describe(err, self.target, 0)) from None
        key = client.key(self.target.kind, PROBE_KEY)
        try:
            retrying.call(lambda: client.get(key, retry=NO_RETRY, timeout=self.target.timeout))
        except GoogleAPICallError as err:
            raise DatastoreWriteError(describe(err, self.target, retrying.retries)) from None
        finally:
            client.close()

    def write(self, frame: DataFrame, version: int, *, dry: bool = False) -> int:
        """Write ``frame``, the later of two rows with one key only (``keys``);
        returns the rows written (the executor's count, so the output is evaluated
        once). ``dry``: the same Spark job, in which the executors build every
        entity but send nothing (no lookup, no commit); returns the rows it took."""
        if self.order is not None:
            frame = ordered.versioned(frame, self.order, version)
        if KEY_COLUMN in frame.columns:
            frame = keys.last_per_key(frame, [KEY_COLUMN], ordered.VERSION)
        properties = frame.drop(ordered.VERSION) if self.order is not None else frame
        entity_shape = shape(properties.schema)
        columns = [*properties.columns, ordered.VERSION] if self.order else properties.columns
        own = None if self.order is not None else version
        write = partial(write_arrow, self.target, entity_shape, columns, own, dry=dry)
        results = frame.mapInArrow(write, RESULT_SCHEMA).collect()
        self.last = sum((WriteResult(**row.asDict()) for row in results), WriteResult())
        logs.event(
            "datastore dry write" if dry else "datastore write",
            kind=self.target.kind,
            version=version,
            rows=self.last.rows,
            written=self.last.written,
            skipped_newer=self.last.skipped,
            chunks=self.last.chunks,
            retries=self.last.retries,
        )
        if self.last.error:
            raise DatastoreWriteError(self.last.error)
        return self.last.rows


def describe(error: BaseException, target: DatastoreTarget, retries: int) -> str:
    code = status(error) or type(error).__name__
    text = str(getattr(error, "message", None) or error).rstrip(".")
    tried = f" (gave up after {retries + 1} attempts)" if is_transient(error) else ""
    hint = HINTS.get(code, "")
    if isinstance(error, DefaultCredentialsError):
        hint = "set sink.datastore.credentialsSecret or give the pod a workload identity"
    return f"{target.where()}: {code}: {text}{tried}" + (f"; {hint}" if hint else "")


# -- executor side ----------------------------------------------------------------

_clients: dict[DatastoreTarget, Any] = {}


def connect(target: DatastoreTarget) -> Any:
    """A ``datastore.Client`` for the target (the emulator's, when one is named)."""
    if target.emulator_host:
        # The client insists on no explicit credentials when it sees the variable.
        anonymous = None if os.environ.get(EMULATOR_ENV) else AnonymousCredentials()  # type: ignore[no-untyped-call]
        return datastore.Client(  # type: ignore[no-untyped-call]
            project=target.project,
            namespace=target.namespace,
            credentials=anonymous,
            client_options={"api_endpoint": f"http://{target.emulator_host}"},
        )
    credentials = target.credentials.google() if target.credentials else None
    return datastore.Client(  # type: ignore[no-untyped-call]
        project=target.project, namespace=target.namespace, credentials=credentials
    )


def write_arrow(
    target: DatastoreTarget,
    entity_shape: EntityShape,
    columns: Sequence[str],
    version: int | None,
    batches: Iterable[pa.RecordBatch],
    *,
    dry: bool = False,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: writes the partition (``dry``: see
    :func:`write_partition`), yields its :class:`WriteResult` as one row of
    :data:`RESULT_SCHEMA`. ``version`` ``None``: each row's own is its last column
    (``ordered.VERSION``)."""
    values = (row for batch in batches for row in rows(batch, columns))
    result = write_partition(target, entity_shape, version, values, dry=dry)
    fields = dataclasses.asdict(result)
    yield pa.RecordBatch.from_pylist([fields], schema=_RESULT_ARROW)


def write_partition(
    target: DatastoreTarget,
    entity_shape: EntityShape,
    version: int | None,
    rows: Iterable[Sequence[Any]],
    *,
    dry: bool = False,
) -> WriteResult:
    """Write one Spark partition; failures come back in ``error`` rather than as an
    exception, so Spark does not re-run a task that cannot succeed and the driver
    gets a message without an executor traceback around it. With ``dry`` the
    client is made and every chunk's entities are built as for a write, then
    dropped: nothing is sent (a standby's warm-up, with rows that must not be
    written again); ``rows`` counts them, ``written`` and ``chunks`` stay 0."""
    counted = _Counted(rows)
    flight: Flight[WriteResult] = Flight(target.concurrency)
    result = WriteResult()
    try:
        client = _client(target)
        for chunk in chunks((entity_shape.ident(row), row) for row in counted):
            entities = {
                ident: _entity(
                    client,
                    target.kind,
                    entity_shape.values(row),
                    ident,
                    row[-1] if version is None else version,
                )
                for ident, row in chunk.items()
            }
            if dry:
                continue  # built, never sent
            write = partial(_write_chunk, client, entities, target)
            result = sum(flight.submit(set(entities), write), result)
            if result.error:
                break
        result = sum(flight.drain(), result)
    except BadKeyError as err:
        result = replace(sum(flight.drain(), result), error=f"{target.where()}: {err}")
    except (GoogleAPICallError, DefaultCredentialsError) as err:
        result = replace(sum(flight.drain(), result), error=describe(err, target, 0))
    return replace(result, rows=counted.count)


def _write_chunk(
    client: Any, entities: Mapping[Ident, Any], target: DatastoreTarget
) -> WriteResult:
    """One chunk, retried on transient errors; a failure comes back in ``error``."""
    retrying = Retrying(target.backoff)
    try:
        written = retrying.call(lambda: commit_chunk(client, entities, target.timeout))
    except GoogleAPICallError as err:
        return WriteResult(retries=retrying.retries, error=describe(err, target, retrying.retries))
    return WriteResult(
        written=written, skipped=len(entities) - written, chunks=1, retries=retrying.retries
    )


def commit_chunk(client: Any, entities: Mapping[Ident, Any], timeout: float) -> int:
    """One transaction: skip the entities stored with a newer version than their own
    (``VERSION_PROPERTY``), put the rest. Returns how many were written."""
    transaction = client.transaction(begin_later=True)
    keys = [entity.key for entity in entities.values()]
    stored = client.get_multi(keys, transaction=transaction, retry=NO_RETRY, timeout=timeout)
    versions = {e.key.id_or_name: e.get(VERSION_PROPERTY) for e in stored}
    fresh = [
        entity
        for ident, entity in entities.items()
        if ident not in versions or supersedes(entity[VERSION_PROPERTY], versions[ident])
    ]
    if not fresh:
        with suppress(GoogleAPICallError):  # nothing to release but a read
            transaction.rollback(retry=NO_RETRY, timeout=timeout)
        return 0
    for entity in fresh:
        transaction.put(entity)
    transaction.commit(retry=NO_RETRY, timeout=timeout)
    return len(fresh)


def _entity(client: Any, kind: str, values: dict[str, Any], ident: Ident, version: int) -> Any:
    entity = datastore.Entity(  # type: ignore[no-untyped-call]
        key=client.key(kind, ident),
        exclude_from_indexes=(*unindexed(values), VERSION_PROPERTY),
    )
    entity.update(values)
    entity[VERSION_PROPERTY] = version
    return entity


def _client(target: DatastoreTarget) -> Any:
    client = _clients.get(target)
    if client is None:
        client = connect(target)
        atexit.register(client.close)
        _clients[target] = client
    return client


class _Counted:
    """Counts the rows a partition's iterator yields."""

    def __init__(self, rows: Iterable[Sequence[Any]]) -> None:
        self.rows = rows
        self.count = 0

    def __iter__(self) -> Iterator[Sequence[Any]]:
        for row in self.rows:
            self.count += 1
            yield row
