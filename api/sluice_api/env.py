"""The environment variables the operator sets on a driver container.

The operator writes them (``sluice_operator.builders``), the driver reads them
(``sluice_job.config``, ``sluice_job.driver``); one name each, here.
"""

from typing import Final

CONFIG: Final = "SLUICE_CONFIG"
"""The pipeline spec as JSON (camelCase, as in the manifest)."""
PIPELINE: Final = "SLUICE_PIPELINE"
NAMESPACE: Final = "SLUICE_NAMESPACE"
CLUSTER_ID: Final = "SLUICE_CLUSTER_ID"
"""The cluster the operator runs in (``sluice_api.cluster``): part of the checkpoint key."""
EPOCH: Final = "SLUICE_EPOCH"
"""The epoch this driver claims; a driver never commits under another."""
STANDBY: Final = "SLUICE_STANDBY"
"""``1``: start as a standby (``spec.upgrade.mode: WarmHandover``): get ready, say so
(``sluice_standby_ready``), then claim the epoch only once the previous driver has
released the checkpoint (or its stop timeout has passed). ``hot``: a hot standby
(``spec.standby: 1``): get ready, keep warm, and claim only when promoted (a request
on the control port, ``promotion``)."""
STANDBY_HOT: Final = "hot"
CONTROL_PORT: Final = "SLUICE_CONTROL_PORT"
"""Where a standby takes its promotion (``promotion``), on the pod's address."""
CODE_VERSION: Final = "SLUICE_CODE_VERSION"
METRICS_PORT: Final = "SLUICE_METRICS_PORT"
UI_ON_NETWORK: Final = "SLUICE_UI_ON_NETWORK"
"""``true``: the platform lets Spark's UI listen on the pod's address (the operator's
``--spark-ui-on-network``); otherwise it listens on loopback only, where
``kubectl port-forward`` reaches it and other pods do not."""
POD_IP: Final = "POD_IP"
"""The pod's address (a fieldRef): the driver serves its metrics there only."""
TERMINATION_LOG: Final = "SLUICE_TERMINATION_LOG"
SPARK_PREFIX: Final = "SLUICE_SPARK_"
"""The driver's Spark settings: it turns these into Spark configuration."""
OPERATOR_SPARK_ENV: Final = "SLUICE_OPERATOR_SPARK_ENV"
"""The :data:`SPARK_PREFIX` names the operator set on the driver container, comma
separated (empty: none), always present on a pod the operator made. It is in the
container's ``env``, which Kubernetes puts over ``envFrom``, so a ConfigMap or Secret
cannot change it; the driver ignores every other :data:`SPARK_PREFIX` variable but
the image's (:data:`IMAGE_SPARK_ENV`). Without it (a driver started by hand, by tests
or the benchmark) every one is used."""
SPARK_JARS: Final = "SLUICE_SPARK_JARS"
"""The connector jars, comma separated: the job image's ``ENV`` sets it, not the operator."""
SPARK_CLASS_ARCHIVE: Final = "SLUICE_SPARK_CLASS_ARCHIVE"
"""A class data sharing archive of Spark's JVM (``sluice_job.class_archive``), which the
job image's ``ENV`` names: the driver's JVM maps the classes from it instead of loading
them one by one."""
IMAGE_SPARK_ENV: Final = (SPARK_JARS, SPARK_CLASS_ARCHIVE)
"""Set by the image, so the operator cannot list it; the driver keeps it. A pod's
``env`` may not set it (``sluice_api.pod.RESERVED_ENV_PREFIXES``) and the operator
refuses an ``envFrom`` source with the key before the pod is created
(``sluice_operator.envfrom``)."""
SPARK_MASTER: Final = "SLUICE_SPARK_MASTER"
SPARK_CONF: Final = "SLUICE_SPARK_CONF"
SPARK_NICENESS: Final = "SLUICE_SPARK_NICENESS"
"""The niceness of the driver's Spark JVM and everything it starts (``sluice_job.spark``,
default 10; 0 runs them at the driver's own priority). Not set by the operator: the
benchmark's switch to measure the driver without it."""
"""JSON object of Spark settings the operator decides (executors on Kubernetes)."""
SPARK_AUTH_SECRET: Final = "SLUICE_SPARK_AUTH_SECRET"
"""Spark's RPC secret (driver and executors, with executors only), a secretKeyRef to the
pipeline's ``<pipeline>-spark-auth`` Secret: the value is never in a pod spec."""
SPARK_AUTH_SECRET_KEY: Final = "secret"
"""The key of that Secret."""
EXECUTOR_POD_TEMPLATE: Final = "SLUICE_EXECUTOR_POD_TEMPLATE"
"""The executor pods' template (a Pod as JSON) the operator decides; the driver writes
it to a file for ``spark.kubernetes.executor.podTemplateFile``."""

# Credentials: ``<PREFIX>_USERNAME`` / ``<PREFIX>_PASSWORD`` from the Secret named in
# the spec, set with secretKeyRef so the values never appear in the pod spec.
KAFKA_CREDENTIALS: Final = "SLUICE_KAFKA"
DEAD_LETTER_KAFKA_CREDENTIALS: Final = "SLUICE_DLQ_KAFKA"
"""The dead-letter brokers' own security (``deadLetter.kafka.security``) only."""
CHECKPOINT_CASSANDRA_CREDENTIALS: Final = "SLUICE_CHECKPOINT_CASSANDRA"
SINK_CASSANDRA_CREDENTIALS: Final = "SLUICE_SINK_CASSANDRA"
SINK_DATASTORE_CREDENTIALS: Final = "SLUICE_SINK_DATASTORE_CREDENTIALS"
"""A service-account key: its JSON, or the path of a mounted key file."""
PUBSUB_CREDENTIALS: Final = "SLUICE_PUBSUB_CREDENTIALS"
"""The Pub/Sub source's (and dead-letter topic's) service-account key, likewise."""

OPTION_PREFIX: Final = "SLUICE_OPTION_"
"""``SLUICE_OPTION_<option>``: a transform option from ``transform.optionsFrom``, set
with secretKeyRef (option names are valid environment variable names)."""

USERNAME_SUFFIX: Final = "_USERNAME"
PASSWORD_SUFFIX: Final = "_PASSWORD"
# TLS material of the same connections, PEM text from the ``tls`` Secrets:
# ``<PREFIX>_CA`` (key ca.crt), ``<PREFIX>_CERT`` (tls.crt), ``<PREFIX>_KEY`` (tls.key).
CA_SUFFIX: Final = "_CA"
CERT_SUFFIX: Final = "_CERT"
KEY_SUFFIX: Final = "_KEY"

DEFAULT_TERMINATION_LOG: Final = "/dev/termination-log"
