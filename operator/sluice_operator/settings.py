"""What the platform decides for every pipeline: the operator's settings.

The operator's command line (the chart's values) fills one :class:`Settings`; every
decision reads it (``decide``), so a test passes its own and the defaults are in one
place.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice_operator import builders, podpolicy
from sluice_operator.consent import DEFAULT as DEFAULT_SECRET_LABEL
from sluice_operator.consent import Label


@dataclass(frozen=True)
class Settings:
    requeue_seconds: float = 2.0
    """How soon to look again while something is in motion (a pod starts or stops)."""
    stable_seconds: float = 60.0
    """A driver running this long, and committing (or with nothing to read), resets
    the count of failures in a row (``running.proven``)."""
    progress_seconds: float = 5.0
    """``status.lastCommit`` follows a running driver's commits at most this often
    (one status write per pipeline per interval, not one per batch); it is also how
    often a stable Running pipeline is looked at."""
    resync_seconds: float = 300.0
    """With nothing in motion (Failed, Suspended) a pipeline is looked at again when
    something changes, or after this long."""
    secret_label: Label | None = DEFAULT_SECRET_LABEL
    """The label a Secret needs before a pipeline may use it (``consent``); ``None``:
    any Secret of the namespace."""
    require_endpoints: bool = False
    """A Secret whose value a pipeline's connection sends must carry the annotation
    ``sluice.dev/allowed-endpoints`` (``consent``); ``False``: without it, anywhere."""
    refused_secret_types: frozenset[str] = frozenset()
    """Secret types no pipeline may use, labelled or not, beyond service-account
    tokens, which are always refused (``consent.token_refusals``)."""
    consent_seconds: float = 10.0
    """How often a pipeline waiting for a Secret's label looks again."""
    consent_recheck_seconds: float = 30.0
    """How often the Secrets a running driver uses are checked again: a label removed
    (or an allowed endpoint withdrawn) stops the driver."""
    driver_cluster_role: str = builders.DRIVER_CLUSTER_ROLE
    """The ClusterRole a driver with executors is bound to in its namespace."""
    driver_service_accounts: frozenset[str] = frozenset()
    """ServiceAccounts a pipeline may name in ``spark.pod.serviceAccountName``."""
    pod_policy: podpolicy.PodPolicy = podpolicy.NOTHING
    """The priority classes, tolerations, node labels and label and annotation keys
    a pipeline's pods may carry (``podpolicy``); default: none."""
    spark_ui_on_network: bool = False
    """Drivers' Spark UI may listen on the pod's address (else on loopback only)."""
    cluster_id: str = ""
    """The cluster the operator runs in (``sluice_api.cluster``), passed to drivers for
    their checkpoint key; ``python -m sluice_operator`` always resolves one
    (``cluster.resolve``)."""


DEFAULTS = Settings()
