"""Command line of the operator: which namespaces it watches, how replicas agree on
the one that acts (a Lease), and where health and metrics are served.

``python -m sluice_operator`` runs it; ``kopf run -m sluice_operator.handlers``
works too (without the Lease and the health server).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO

import kopf
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from sluice_api.cluster import ClusterIdError
from sluice_api.logformat import JsonFormatter
from sluice_operator import clusterid, podpolicy
from sluice_operator.builders import DRIVER_CLUSTER_ROLE
from sluice_operator.consent import DEFAULT_LABEL, ENDPOINTS_ANNOTATION, TOKEN_TYPE, Label
from sluice_operator.leader import LeaderElection, process_identity
from sluice_operator.settings import DEFAULTS


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m sluice_operator",
        description="Reconcile StreamingPipelines (sluice.dev/v1alpha1) into driver pods.",
    )
    scope = result.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", action="append", metavar="NS", help="watch only NS (repeatable)"
    )
    scope.add_argument("--all-namespaces", action="store_true", help="watch the whole cluster")
    result.add_argument(
        "--http-port", type=int, default=8080, help="/healthz, /readyz and /metrics (0: off)"
    )
    result.add_argument("--http-host", default="0.0.0.0", help="address of the HTTP server")
    result.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", "default"),
        help="namespace of the leader-election Lease (default: $POD_NAMESPACE or default)",
    )
    result.add_argument(
        "--no-leader-election", action="store_true", help="act at once (a single replica)"
    )
    result.add_argument(
        "--secret-label",
        default=DEFAULT_LABEL,
        metavar="KEY=VALUE",
        help=(
            "a Secret a pipeline names must carry this label, or no driver starts "
            f"(default {DEFAULT_LABEL}; empty: any Secret of the namespace)"
        ),
    )
    result.add_argument(
        "--require-secret-endpoints",
        action="store_true",
        help=(
            f"a Secret whose value a pipeline sends (a Kafka or Cassandra login, the "
            f"Datastore key) must carry the annotation {ENDPOINTS_ANNOTATION} listing where "
            "it may go, or no driver starts (default: without it, anywhere)"
        ),
    )
    result.add_argument(
        "--refused-secret-types",
        default="",
        metavar="TYPE,...",
        help=(
            f"Secret types no pipeline may use, labelled or not, besides {TOKEN_TYPE} "
            "(always refused)"
        ),
    )
    result.add_argument(
        "--driver-cluster-role",
        default=DRIVER_CLUSTER_ROLE,
        metavar="NAME",
        help=(
            "ClusterRole bound (per pipeline, in its namespace) to a driver that runs "
            f"executor pods (default {DRIVER_CLUSTER_ROLE}; the chart ships it)"
        ),
    )
    result.add_argument(
        "--driver-service-accounts",
        default="",
        metavar="NAMES",
        help=(
            "comma-separated ServiceAccounts a pipeline may name in "
            "spark.pod.serviceAccountName (default: none; drivers run as their own account)"
        ),
    )
    _pod_policy_flags(result)
    result.add_argument(
        "--consent-recheck-seconds",
        type=float,
        default=DEFAULTS.consent_recheck_seconds,
        metavar="SECONDS",
        help=(
            "how often the Secrets a running driver uses are checked again; consent "
            f"withdrawn stops the driver (default {DEFAULTS.consent_recheck_seconds:g})"
        ),
    )
    result.add_argument(
        "--spark-ui-on-network",
        action="store_true",
        help=(
            "let a driver's Spark UI (spec.spark.ui.enabled) listen on its pod's address, "
            "where other pods reach it (default: on loopback only, for kubectl port-forward)"
        ),
    )
    result.add_argument(
        "--cluster-name",
        default="",
        metavar="NAME",
        help=(
            "this cluster's identity in drivers' checkpoint keys (default: the UID of the "
            "kube-system Namespace)"
        ),
    )
    result.add_argument("--verbose", action="store_true", help="debug logging")
    return result


def _pod_policy_flags(result: argparse.ArgumentParser) -> None:
    """What a pipeline's pods may carry (``podpolicy``); each flag comma-separated,
    default none."""
    flags = podpolicy.FLAGS
    for field, metavar, what in (
        ("priority_classes", "NAMES", "PriorityClasses spark.pod.priorityClassName may name"),
        (
            "toleration_keys",
            "KEYS",
            "taint keys a driver's or executors' toleration may name; '*': any, and a "
            "toleration without a key, which tolerates every taint",
        ),
        (
            "node_labels",
            "KEY[=VALUE],...",
            "node labels a nodeSelector or node affinity may name: key (any value) or key=value",
        ),
        (
            "label_keys",
            "KEYS",
            "label keys of spark.pod.labels: a key or a prefix ending in '*' "
            "(a bare '*' admits all but identity and isolation keys)",
        ),
        ("annotation_keys", "KEYS", "annotation keys of spark.pod.annotations, as for labels"),
    ):
        result.add_argument(
            flags[field], dest=field, default="", metavar=metavar, help=f"{what} (default: none)"
        )


def pod_policy(args: argparse.Namespace) -> podpolicy.PodPolicy:
    """The policy the command line gives."""
    return podpolicy.PodPolicy(
        priority_classes=frozenset(_listed(args.priority_classes)),
        toleration_keys=frozenset(_listed(args.toleration_keys)),
        node_labels=frozenset(_listed(args.node_labels)),
        label_keys=_listed(args.label_keys),
        annotation_keys=_listed(args.annotation_keys),
    )


def _listed(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


class RetriesAreWarnings(logging.Filter):
    """kopf logs each retried API request at error level ("Request attempt #1/9
    failed; will retry: ..."), as for a 429 from an API server still setting up a CRD
    it was just given; the retry is a warning. Its last attempt ("escalating") stays
    an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.levelno == logging.ERROR
            and record.name.startswith("kopf.")
            and "failed; will retry:" in record.getMessage()
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def configure_logging(level: int, stream: TextIO | None = None) -> None:
    """Every logger (the operator's and kopf's) writes JSON lines to stderr, in the
    driver's format (``sluice_api.logformat``). kopf's own info lines (a handler
    succeeded, for every pod and pipeline event) are framework chatter: written only
    at debug (``--verbose``); its warnings and errors always, a retried request as a
    warning (:class:`RetriesAreWarnings`)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RetriesAreWarnings())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("kopf").setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    configure_logging(logging.DEBUG if args.verbose else logging.INFO)
    from sluice_operator import handlers  # registers the handlers with kopf

    kube = handlers.kube()
    try:
        cluster_id = clusterid.resolve(args.cluster_name, kube.namespace_uid)
    except (clusterid.ClusterIdUnknownError, ClusterIdError) as err:
        logging.getLogger("sluice_operator").error("%s", err)
        return 2
    logging.getLogger("sluice_operator").info("cluster id %s", cluster_id)
    handlers.SETTINGS = dataclasses.replace(
        handlers.SETTINGS,
        secret_label=Label.parse(args.secret_label),
        require_endpoints=args.require_secret_endpoints,
        refused_secret_types=frozenset(
            kind.strip() for kind in args.refused_secret_types.split(",") if kind.strip()
        ),
        driver_cluster_role=args.driver_cluster_role,
        driver_service_accounts=frozenset(
            name.strip() for name in args.driver_service_accounts.split(",") if name.strip()
        ),
        pod_policy=pod_policy(args),
        spark_ui_on_network=args.spark_ui_on_network,
        consent_recheck_seconds=args.consent_recheck_seconds,
        cluster_id=cluster_id,
    )
    leading = threading.Event()
    if args.http_port:
        _serve_http(args.http_host, args.http_port, leading)
    election = None
    if args.no_leader_election:
        leading.set()
    else:
        election = LeaderElection(kube.api, args.lease_namespace)
        election.acquire()
        leading.set()
    try:
        kopf.run(
            # kopf's own guess (getpass.getuser) raises for a uid without a passwd
            # entry. Its Identity is a NewType of str that kopf does not export.
            identity=process_identity(),  # type: ignore[arg-type]
            standalone=True,
            clusterwide=bool(args.all_namespaces or not args.namespace),
            namespaces=args.namespace or (),
        )
    finally:
        if election is not None:
            election.release()
    return 0


def _serve_http(host: str, port: int, leading: threading.Event) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/metrics":
                self._reply(200, generate_latest(), CONTENT_TYPE_LATEST)
            elif self.path == "/healthz":
                self._reply(200, b"ok\n")
            elif self.path == "/readyz":
                ok = leading.is_set()
                self._reply(200 if ok else 503, b"leading\n" if ok else b"standby\n")
            else:
                self._reply(404, b"not found\n")

        def _reply(self, code: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
