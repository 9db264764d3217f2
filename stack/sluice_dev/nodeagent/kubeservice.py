"""The environment a kubelet gives every container for the ``kubernetes`` Service.

In a cluster each container finds the API server through ``KUBERNETES_SERVICE_HOST``
and ``KUBERNETES_SERVICE_PORT`` (client-go's and fabric8's in-cluster config read
them; Spark's driver is given ``k8s://https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_
SERVICE_PORT)`` as its master), plus the Docker-link style ``KUBERNETES_PORT*``
variables. Nothing routes the Service's cluster IP here, so they name the API server
the agent itself uses, whose certificate is the one the pod's kubeconfig trusts
(:mod:`sluice_dev.nodeagent.serviceaccount`).

Pure. Precedence and expansion follow the kubelet (:mod:`sluice_dev.nodeagent.podspec`
applies them): the pod's own ``env``/``envFrom`` win over these, and ``$(VAR)`` in env
values and ``command``/``args`` sees them.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def service_env(url: str) -> dict[str, str]:
    """The ``kubernetes`` Service's variables for an API server at ``url``
    (``https://host:port``; port 443 when the URL names none)."""
    parts = urlsplit(url)
    if parts.scheme != "https" or not parts.hostname:
        raise ValueError(f"the API server URL {url!r} is not https://host[:port]")
    host, port = parts.hostname, str(parts.port or 443)
    address = f"tcp://{host}:{port}"
    prefix = f"KUBERNETES_PORT_{port}_TCP"
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "KUBERNETES_SERVICE_PORT_HTTPS": port,
        "KUBERNETES_PORT": address,
        prefix: address,
        f"{prefix}_PROTO": "tcp",
        f"{prefix}_PORT": port,
        f"{prefix}_ADDR": host,
    }
