"""A hostile tenant's view of the cluster: the API as the code in a driver pod sees it
(the service-account credentials the node agent or a real node's kubelet mounted for
that very container, used exactly as the driver's code would use them), and the
executor pods Spark would create from the template the operator gives the driver."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import config
from kubernetes.client import ApiClient, Configuration, CoreV1Api
from kubernetes.client.exceptions import ApiException

from sluice_api import env as env_names
from sluice_dev.localcluster import DRIVER_POD_POLICY
from sluice_dev.paths import Layout
from sluice_dev.realnode.plan import Worker
from sluice_dev.servers import nodeagent
from sluice_operator import naming
from tests.support.waiting import wait_for

DRIVER_CONTAINER = "driver"


def mounted_credentials(layout: Layout, pod: Any, container: str = DRIVER_CONTAINER) -> Path:
    """Where the node agent wrote the container's service-account kubeconfig (what
    ``KUBECONFIG`` names in its environment; ``sluice_dev.nodeagent.serviceaccount``)."""
    meta = pod.metadata
    pod_dir = nodeagent.state_dir(layout) / "pods" / f"{meta.namespace}_{meta.name}_{meta.uid}"
    return pod_dir / container / "serviceaccount" / "kubeconfig"


def as_driver(layout: Layout, pod: Any) -> CoreV1Api:
    """The core API with the token mounted in the running driver ``pod``."""
    kubeconfig = mounted_credentials(layout, pod)
    wait_for(kubeconfig.exists, timeout=60, what=f"the token mounted in {pod.metadata.name}")
    client = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    return CoreV1Api(client)


def kubelet_volumes(worker: Worker, pod: Any) -> Path:
    """Where ``worker``'s kubelet keeps the volumes of ``pod`` it mounts in the pod's
    containers (one directory per volume plugin)."""
    return worker.kubelet_root / "pods" / str(pod.metadata.uid) / "volumes"


def kubelet_token(worker: Worker, pod: Any) -> Path | None:
    """The ServiceAccount token ``worker``'s kubelet projected for ``pod`` (the file a
    container reads at /var/run/secrets/kubernetes.io/serviceaccount/token); None if
    it projected none."""
    found = sorted(kubelet_volumes(worker, pod).glob("kubernetes.io~projected/*/token"))
    return found[0] if found else None


def with_token(layout: Layout, token: Path) -> CoreV1Api:
    """The core API with the projected ``token`` and the CA bundle beside it, as the
    driver's code would call it (the admin kubeconfig gives only the server's address).
    Both are copied as they are now: the kubelet removes the volume with its pod, and a
    client kept to be refused once the pod is gone must still make its TLS connections
    (a new connection reads the CA file again; it failed with ``FileNotFoundError``)."""
    kubeconfig = yaml.safe_load(layout.kubeconfig.read_text())
    configuration = Configuration()
    configuration.host = kubeconfig["clusters"][0]["cluster"]["server"]
    ca_copy = Path(tempfile.mkdtemp(prefix="sluice-token-")) / "ca.crt"
    ca_copy.write_bytes((token.parent / "ca.crt").read_bytes())
    configuration.ssl_ca_cert = str(ca_copy)
    configuration.api_key = {"authorization": f"Bearer {token.read_text().strip()}"}
    return CoreV1Api(ApiClient(configuration))


def executor_pod(driver_pod: Any, number: int) -> dict[str, Any]:
    """Executor pod ``number`` as Spark builds it in ``driver_pod``: the operator's
    template, Spark's name, image and ServiceAccount from the driver's Spark settings."""
    env = {e.name: e.value for e in driver_pod.spec.containers[0].env if e.value is not None}
    pod: dict[str, Any] = json.loads(env[env_names.EXECUTOR_POD_TEMPLATE])
    conf = json.loads(env[env_names.SPARK_CONF])
    prefix = conf["spark.kubernetes.executor.podNamePrefix"]
    pod["metadata"]["name"] = f"{prefix}-exec-{number}"
    pod["spec"]["serviceAccountName"] = conf[
        "spark.kubernetes.authenticate.executor.serviceAccountName"
    ]
    pod["spec"]["containers"][0]["image"] = conf["spark.kubernetes.container.image"]
    return pod


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def refusal(call: Any, *args: Any, **kwargs: Any) -> Refusal | None:
    """The API server's refusal of ``call(*args, **kwargs)``; ``None`` if it was done."""
    try:
        call(*args, **kwargs)
    except ApiException as err:
        try:
            message = str(json.loads(err.body or "{}").get("message", ""))
        except ValueError:
            message = str(err.body)
        return Refusal(int(err.status or 0), message)
    return None


def executor_selector(pipeline: str) -> str:
    return f"{naming.LABEL_PIPELINE}={pipeline},{naming.LABEL_ROLE}={naming.ROLE_EXECUTOR}"


def forbidden_by_rbac(found: Refusal | None) -> bool:
    """403 from RBAC (the policy never sees requests RBAC refuses)."""
    return found is not None and found.status == 403 and DRIVER_POD_POLICY not in found.message


def forbidden_by_policy(
    found: Refusal | None, says: str = "", policy: str = DRIVER_POD_POLICY
) -> bool:
    """403 from the chart's admission ``policy`` (its message naming ``says``)."""
    return (
        found is not None
        and found.status == 403
        and f"ValidatingAdmissionPolicy '{policy}'" in found.message
        and says in found.message
    )
