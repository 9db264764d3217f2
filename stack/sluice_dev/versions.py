"""Every pinned version of the local stack, in one place.

A version change here changes the cache directory of the artifact it names, so the
next ``sluice-dev provision`` builds or downloads it afresh.
"""

from typing import Final

KAFKA: Final = "3.9.2"
KAFKA_SCALA: Final = "2.13"
CASSANDRA: Final = "5.0.9"
# Must equal the pinned pyspark: spark-sql-kafka is built per Spark release.
SPARK: Final = "4.2.0"
KUBERNETES: Final = "1.34.4"
KUBERNETES_STAGING: Final = "0.34.4"
ETCD: Final = "3.6.16"
# The cluster DNS of real nodes (stack/go/coredns).
COREDNS: Final = "1.15.0"
HELM: Final = "3.22.0"
PROMETHEUS: Final = "0.316.0"
# The Go module that ships pstest, Google's in-memory Pub/Sub server.
PUBSUB_GO: Final = "2.8.1"
# The local stack's monitoring (sluice-dev up monitoring; provision --monitoring).
# Prometheus itself is the PROMETHEUS module version above (promtool's).
ALERTMANAGER: Final = "0.35.0"
# v0.85.0 is the newest release the module proxy reachable here lists.
PROMETHEUS_OPERATOR: Final = "0.85.0"
