"""A local server speaking the Google Cloud Datastore v1 API, for tests and the demo.

Google's Datastore emulator cannot be installed on the development machines, yet the
Datastore sink must be tested with the real ``google-cloud-datastore`` client over
its real transport. With ``DATASTORE_EMULATOR_HOST`` set, that client opens an
*insecure gRPC channel* to the host (``google/cloud/datastore/_gapic.py``), so this
server answers the ``google.datastore.v1.Datastore`` gRPC service, built from the
client library's own protobuf messages.

What it implements: Lookup, Commit (insert, update, upsert, delete; transactional and
not), BeginTransaction, Rollback, RunQuery (kind, equality filters, key order,
limit, offset, cursors, keys-only), AllocateIds and ReserveIds, with Datastore's
limits that matter to a writer (500 mutations per commit, 1500-byte indexed
strings, reserved ``__*__`` names) and optimistic transactions (a commit whose reads
changed meanwhile fails ABORTED). Data lives in memory, per project, database and
namespace, and is lost when the server stops.

Tests reach it out of band over a small HTTP control port (:mod:`.control`,
clients in :mod:`.remote`): make the next N calls of a method fail with a status
code (before or after they take effect), hold calls until released, read call
counters, forget a project. Faults and counters are per project, so concurrent test runs sharing the
server never see each other's.
"""
