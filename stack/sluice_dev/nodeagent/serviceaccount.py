"""A pod's service-account credentials, as a kubelet would mount them, for a process.

The API server's ServiceAccount admission gives every pod that automounts a token a
projected volume (``kube-api-access-*``) at ``/var/run/secrets/kubernetes.io/
serviceaccount``: a token of the pod's service account bound to the pod, the CA and
the namespace. A kubelet fills it through the TokenRequest API. Processes cannot see
that path here (no mount namespaces), so for a container that mounts such a volume
the agent does the same TokenRequest (as the kubelet's ``system:node`` role allows),
writes ``token``, ``ca.crt`` and ``namespace`` under the container's own directory,
plus a ``kubeconfig`` that points at them and at the API server the agent itself
uses, and sets ``KUBECONFIG`` (unless the pod sets it). Clients that fall back from
in-cluster config to ``KUBECONFIG`` (the official Python client, kopf, client-go)
then act as the pod's service account, so its RBAC is what is exercised.

The token is requested at every container start, with the volume's
``expirationSeconds`` (3607 from the admission plugin: the API server extends such
tokens to a year, as it does for kubelets) and is not rotated while the process runs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Final

import yaml
from kubernetes.client import (
    AuthenticationV1TokenRequest,
    CoreV1Api,
    V1BoundObjectReference,
    V1Container,
    V1Pod,
    V1TokenRequestSpec,
)
from kubernetes.client.exceptions import ApiException

from sluice_dev.nodeagent.podspec import ConfigError, LaunchPlan

MOUNT_PATH: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_EXPIRATION: Final = 3607
TIMEOUT: Final = 10.0


@dataclasses.dataclass(frozen=True)
class ApiServer:
    """Where the pod's clients go, and the CA that signs the server's certificate."""

    url: str
    ca_file: Path


def token_source(pod: V1Pod, container: V1Container) -> tuple[int, list[str]] | None:
    """``(expirationSeconds, audiences)`` of the service-account token the container
    mounts at the well-known path, or ``None`` when it mounts none."""
    mounted = {m.name for m in container.volume_mounts or () if m.mount_path == MOUNT_PATH}
    volumes = (pod.spec.volumes if pod.spec else None) or ()
    for volume in volumes:
        if volume.name not in mounted or volume.projected is None:
            continue
        for source in volume.projected.sources or ():
            token = source.service_account_token
            if token is not None:
                audiences = [token.audience] if token.audience else []
                return int(token.expiration_seconds or DEFAULT_EXPIRATION), audiences
    return None


def mount(
    core: CoreV1Api,
    server: ApiServer,
    pod: V1Pod,
    container: V1Container,
    directory: Path,
    plan: LaunchPlan,
) -> LaunchPlan:
    """``plan`` with the pod's credentials written to ``directory`` and named in
    ``KUBECONFIG``; unchanged for a container that mounts no token."""
    source = token_source(pod, container)
    if source is None or pod.metadata is None or pod.spec is None:
        return plan
    namespace, account = pod.metadata.namespace or "", pod.spec.service_account_name or "default"
    token = request_token(core, pod, account, *source)
    directory.mkdir(parents=True, exist_ok=True)
    files = {
        "token": token,
        "ca.crt": server.ca_file.read_text(),
        "namespace": namespace,
        "kubeconfig": kubeconfig(server.url, directory, namespace, token),
    }
    for name, text in files.items():
        path = directory / name
        path.write_text(text)
        path.chmod(0o600)
    env = dict(plan.env)
    env.setdefault("KUBECONFIG", str(directory / "kubeconfig"))
    return dataclasses.replace(plan, env=env)


def request_token(
    core: CoreV1Api, pod: V1Pod, account: str, expiration: int, audiences: list[str]
) -> str:
    """A token of ``account`` bound to ``pod`` (invalid once the pod is deleted)."""
    assert pod.metadata is not None
    request = AuthenticationV1TokenRequest(
        spec=V1TokenRequestSpec(
            audiences=audiences,
            expiration_seconds=expiration,
            bound_object_ref=V1BoundObjectReference(
                api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid
            ),
        )
    )
    try:
        issued = core.create_namespaced_service_account_token(
            account, pod.metadata.namespace or "", request, _request_timeout=TIMEOUT
        )
    except ApiException as err:
        raise ConfigError(
            f"cannot get a token for service account {account}: {err.status} {err.reason}"
        ) from err
    if issued.status is None or not issued.status.token:
        raise ConfigError(f"the API server issued no token for service account {account}")
    return str(issued.status.token)


def kubeconfig(url: str, directory: Path, namespace: str, token: str) -> str:
    """The token is written inline, not as ``tokenFile``: Spark's Kubernetes client
    (fabric8) reads a kubeconfig's ``token`` and ignores ``tokenFile``, and the token
    is not rotated while the process runs anyway."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "in-cluster",
                "cluster": {"server": url, "certificate-authority": str(directory / "ca.crt")},
            }
        ],
        "users": [{"name": "service-account", "user": {"token": token}}],
        "contexts": [
            {
                "name": "in-cluster",
                "context": {
                    "cluster": "in-cluster",
                    "user": "service-account",
                    "namespace": namespace,
                },
            }
        ],
        "current-context": "in-cluster",
    }
    return yaml.safe_dump(config, sort_keys=False)
