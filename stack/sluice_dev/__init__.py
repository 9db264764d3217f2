"""The local stack: real Kafka, Cassandra and a Kubernetes control plane on loopback.

Development machines have no Docker engine and no cluster, so Sluice provisions its
servers from Maven Central and the Go module proxy, caches them by version and runs
them as local processes. ``sluice-dev`` is the command line over this package.
"""
