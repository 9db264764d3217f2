"""The Datastore v1 protobuf classes the server speaks.

They come from the client library's own generated types (the raw protobuf behind
each proto-plus wrapper), so client and server agree byte for byte.
"""

from __future__ import annotations

from typing import Any, Final

from google.cloud.datastore_v1.types import datastore, entity, query

SERVICE: Final = "google.datastore.v1.Datastore"

LookupRequest: Any = datastore.LookupRequest.pb()
LookupResponse: Any = datastore.LookupResponse.pb()
RunQueryRequest: Any = datastore.RunQueryRequest.pb()
RunQueryResponse: Any = datastore.RunQueryResponse.pb()
BeginTransactionRequest: Any = datastore.BeginTransactionRequest.pb()
BeginTransactionResponse: Any = datastore.BeginTransactionResponse.pb()
CommitRequest: Any = datastore.CommitRequest.pb()
CommitResponse: Any = datastore.CommitResponse.pb()
RollbackRequest: Any = datastore.RollbackRequest.pb()
RollbackResponse: Any = datastore.RollbackResponse.pb()
AllocateIdsRequest: Any = datastore.AllocateIdsRequest.pb()
AllocateIdsResponse: Any = datastore.AllocateIdsResponse.pb()
ReserveIdsRequest: Any = datastore.ReserveIdsRequest.pb()
ReserveIdsResponse: Any = datastore.ReserveIdsResponse.pb()

Entity: Any = entity.Entity.pb()
Key: Any = entity.Key.pb()
Value: Any = entity.Value.pb()
EntityResult: Any = query.EntityResult.pb()
QueryResultBatch: Any = query.QueryResultBatch.pb()
PropertyFilter: Any = query.PropertyFilter.pb()
CompositeFilter: Any = query.CompositeFilter.pb()
PropertyOrder: Any = query.PropertyOrder.pb()
