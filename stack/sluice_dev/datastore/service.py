"""The ``google.datastore.v1.Datastore`` gRPC service over the store.

Every call is counted, may be failed by an injected fault (before or after it
takes effect, see :mod:`.faults`), and turns an :class:`~.errors.ApiError` into its
gRPC status. Requests and replies are the client library's own protobufs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

import grpc

from sluice_dev.datastore import keys, messages, mutations, queries
from sluice_dev.datastore.errors import ApiError, invalid, unsupported
from sluice_dev.datastore.faults import Faults, Holds, Method, Stats, When
from sluice_dev.datastore.store import Store
from sluice_dev.datastore.transactions import Transaction, Transactions

log = logging.getLogger("sluice_dev.datastore")

MAX_LOOKUP_KEYS: Final = 1000
"""Keys past this many are answered as ``deferred``; the client asks again."""

Handler = Callable[[Any], Any]


class Datastore:
    def __init__(self, store: Store, faults: Faults, stats: Stats) -> None:
        self.store = store
        self.transactions = Transactions()
        self.faults = faults
        self.holds = Holds()
        self.stats = stats

    def handler(self) -> grpc.GenericRpcHandler:
        table: dict[Method, tuple[Handler, Any, Any]] = {
            Method.LOOKUP: (self.lookup, messages.LookupRequest, messages.LookupResponse),
            Method.RUN_QUERY: (self.run_query, messages.RunQueryRequest, messages.RunQueryResponse),
            Method.BEGIN_TRANSACTION: (
                self.begin_transaction,
                messages.BeginTransactionRequest,
                messages.BeginTransactionResponse,
            ),
            Method.COMMIT: (self.commit, messages.CommitRequest, messages.CommitResponse),
            Method.ROLLBACK: (self.rollback, messages.RollbackRequest, messages.RollbackResponse),
            Method.ALLOCATE_IDS: (
                self.allocate_ids,
                messages.AllocateIdsRequest,
                messages.AllocateIdsResponse,
            ),
            Method.RESERVE_IDS: (
                self.reserve_ids,
                messages.ReserveIdsRequest,
                messages.ReserveIdsResponse,
            ),
        }
        handlers = {
            method.value: grpc.unary_unary_rpc_method_handler(
                self._guarded(method, call),
                request_deserializer=request.FromString,
                response_serializer=response.SerializeToString,
            )
            for method, (call, request, response) in table.items()
        }
        return grpc.method_handlers_generic_handler(messages.SERVICE, handlers)

    def forget(self, project: str) -> None:
        """Drop the project's entities, transactions, faults and counters."""
        self.store.forget(project)
        self.transactions.forget(project)
        self.faults.forget(project)
        self.holds.forget(project)
        self.stats.forget(project)

    def _guarded(self, method: Method, call: Handler) -> Callable[[Any, grpc.ServicerContext], Any]:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            project = request.project_id
            self.stats.call(project, method)
            self.holds.pause(project, method)
            try:
                self._strike(project, method, When.BEFORE)
                response = call(request)
                self._strike(project, method, When.AFTER)
            except ApiError as err:
                self.stats.failure(project, method, err.code)
                log.info("%s %s: %s %s", project, method.value, err.code.name, err.message)
                context.abort(err.code, err.message)
            return response

        return guarded

    def _strike(self, project: str, method: Method, when: When) -> None:
        fault = self.faults.take(project, method, when)
        if fault is not None:
            raise ApiError(fault.code, fault.message)

    # -- reads -----------------------------------------------------------------

    def lookup(self, request: Any) -> Any:
        project, database = request.project_id, request.database_id
        wanted = [keys.from_pb(k, project, database) for k in request.keys[:MAX_LOOKUP_KEYS]]
        transaction, began = self._reading(request.read_options, project, database)
        response = messages.LookupResponse()
        for key in wanted:
            self._look(response, key, transaction)
        for key_pb in request.keys[MAX_LOOKUP_KEYS:]:
            response.deferred.add().CopyFrom(key_pb)
        if began and transaction is not None:
            response.transaction = transaction.id
        return response

    def _look(self, response: Any, key: keys.StoreKey, transaction: Transaction | None) -> None:
        with self.store.lock:
            record, now = self.store.record(key), self.store.version
        if transaction is not None:
            transaction.saw(key, record.version if record else 0)
        if record is not None and record.entity is not None:
            response.found.add(entity=record.entity, version=record.version)
        else:
            response.missing.add(version=now).entity.key.CopyFrom(key.to_pb())

    def run_query(self, request: Any) -> Any:
        project, database = request.project_id, request.database_id
        if request.WhichOneof("query_type") != "query":
            raise unsupported("GQL queries")
        if request.HasField("explain_options"):
            raise unsupported("query explain options")
        partition = keys.partition_of(request, project, database)
        transaction, began = self._reading(request.read_options, project, database)
        response = messages.RunQueryResponse()
        response.batch.CopyFrom(queries.run(self.store, partition, request.query))
        response.query.CopyFrom(request.query)
        if began and transaction is not None:
            response.transaction = transaction.id
        return response

    def _reading(
        self, options: Any, project: str, database: str
    ) -> tuple[Transaction | None, bool]:
        """The transaction a read belongs to, and whether the read began it."""
        which = options.WhichOneof("consistency_type")
        if which == "transaction":
            return self.transactions.get(options.transaction, project), False
        if which == "new_transaction":
            return self._begin(project, database, options.new_transaction), True
        if which == "read_time":
            raise unsupported("reads at a read_time")
        return None, False

    # -- transactions and writes --------------------------------------------------

    def begin_transaction(self, request: Any) -> Any:
        options = request.transaction_options
        transaction = self._begin(request.project_id, request.database_id, options)
        return messages.BeginTransactionResponse(transaction=transaction.id)

    def _begin(self, project: str, database: str, options: Any) -> Transaction:
        read_only = options.WhichOneof("mode") == "read_only"
        return self.transactions.begin(project, database, read_only=read_only)

    def rollback(self, request: Any) -> Any:
        self.transactions.end(request.transaction, request.project_id)
        return messages.RollbackResponse()

    def commit(self, request: Any) -> Any:
        project, database = request.project_id, request.database_id
        self.stats.commit(project, len(request.mutations))
        transaction = self._committing(request)
        planned = mutations.plan(
            request.mutations, project, database, transactional=transaction is not None
        )
        if transaction is not None and transaction.read_only and planned:
            raise invalid("a read-only transaction cannot write")
        reads = transaction.reads if transaction is not None else {}
        return mutations.apply(self.store, planned, reads)

    def _committing(self, request: Any) -> Transaction | None:
        """The transaction a commit ends (``None``: non-transactional)."""
        which = request.WhichOneof("transaction_selector")
        mode = request.mode
        if mode == messages.CommitRequest.NON_TRANSACTIONAL:
            if which is not None:
                raise invalid("a non-transactional commit cannot name a transaction")
            return None
        if mode != messages.CommitRequest.TRANSACTIONAL:
            raise invalid("commit mode is unspecified")
        if which == "transaction":
            return self.transactions.end(request.transaction, request.project_id)
        if which == "single_use_transaction":
            options = request.single_use_transaction
            return Transaction(
                b"", request.project_id, request.database_id, options.HasField("read_only")
            )
        raise invalid("a transactional commit needs a transaction")

    # -- ids --------------------------------------------------------------------

    def allocate_ids(self, request: Any) -> Any:
        project, database = request.project_id, request.database_id
        response = messages.AllocateIdsResponse()
        for key_pb in request.keys:
            if keys.is_complete(key_pb):
                raise invalid("allocateIds needs incomplete keys")
            partition = keys.partition_of(key_pb, project, database)
            key = keys.completed(key_pb, partition, self.store.new_id())
            response.keys.add().CopyFrom(key.to_pb())
        return response

    def reserve_ids(self, request: Any) -> Any:
        for key_pb in request.keys:
            keys.from_pb(key_pb, request.project_id, request.database_id)
        return messages.ReserveIdsResponse()
