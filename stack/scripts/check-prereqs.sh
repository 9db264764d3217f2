#!/usr/bin/env bash
# Checks the toolchains the stack is built with and says what is missing.
set -u
missing=0
need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "missing: $1 ($2)" >&2
    missing=1
  fi
}
need python3 "Python 3.11+ runs sluice, the tests and the node agent"
need java "Java 17 runs Kafka, Cassandra and Spark"
need mvn "Maven fetches the Kafka, Cassandra and Spark connector jars"
need go "Go builds etcd, the Kubernetes control plane, helm and promtool"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "python3 must be 3.11 or newer" >&2; missing=1; }
if command -v java >/dev/null 2>&1; then
  v=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
  [ "${v:-0}" -ge 17 ] || { echo "java must be 17 or newer (found ${v:-none})" >&2; missing=1; }
fi
exit $missing
