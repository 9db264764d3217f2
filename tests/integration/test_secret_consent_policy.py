"""Consent a tenant cannot give itself: the chart's secret-consent admission policy
on the real API server.

Reproduction (issue 38, finding 2): a tenant allowed to write Secrets in its
namespace created a Secret with the consent label (``sluice.dev/usable=true``) and
its own ``sluice.dev/allowed-endpoints``; the operator, which reads only the label,
let its pipelines use it. With the policy bound to the namespace, a tenant may
create and change Secrets, but not label one, relabel it or change where a labelled
one may go; the platform (``system:masters`` here) may, and a tenant may still take
consent away or rotate a labelled Secret's data.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from sluice_dev.kubectl import Kubectl, KubectlError
from sluice_dev.localcluster import render_chart
from sluice_dev.paths import Layout
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.hostile, pytest.mark.timeout(300)]

TENANT = "tenant-a"
LABEL = {"sluice.dev/usable": "true"}
ENDPOINTS = "sluice.dev/allowed-endpoints"
REFUSED = "only the platform may give a Secret the label sluice.dev/usable"


def secret(namespace: str, name: str, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "stringData": {"password": "p"},
    }


def refused(call: Callable[[], object]) -> str | None:
    """The API server's refusal of ``call`` (a kubectl run), ``None`` if it passed."""
    try:
        call()
    except KubectlError as err:
        return str(err)
    return None


def test_only_the_platform_may_label_a_secret_usable_or_say_where_it_may_go(
    kube_stack: Layout, unique_name: Callable[[str], str]
) -> None:
    kubectl = Kubectl(kube_stack)
    namespace = unique_name("consent")[:50]
    kubectl("create", "namespace", namespace)
    try:
        for doc in render_chart(kube_stack, f"watchNamespaces={{{namespace}}}"):
            if doc["kind"].startswith("ValidatingAdmissionPolicy") and doc["metadata"][
                "name"
            ].endswith("-secret-consent"):
                kubectl.apply(doc)
        kubectl(
            "create",
            "role",
            "secrets",
            "-n",
            namespace,
            "--verb=get,create,update,patch",
            "--resource=secrets",
        )
        kubectl(
            "create",
            "rolebinding",
            "tenant",
            "-n",
            namespace,
            "--role=secrets",
            f"--user={TENANT}",
        )

        def as_tenant(*args: str, stdin: str | None = None) -> str:
            return kubectl(f"--as={TENANT}", "-n", namespace, *args, stdin=stdin)

        def create(body: dict[str, Any], *args: str) -> str:
            return as_tenant("create", *args, "-f", "-", stdin=json.dumps(body))

        labelled = secret(namespace, "mine", labels=LABEL)
        message = wait_for(
            lambda: refused(lambda: create(labelled, "--dry-run=server")),
            timeout=60,
            what="the policy to be in force (the tenant's labelled Secret refused)",
        )
        assert REFUSED in message
        assert TENANT in message
        assert refused(lambda: create(labelled)) is not None
        create(secret(namespace, "plain"))  # an unlabelled Secret is the tenant's own
        label = json.dumps({"metadata": {"labels": LABEL}})
        message = refused(lambda: as_tenant("patch", "secret", "plain", "-p", label)) or ""
        assert REFUSED in message

        kubectl("patch", "secret", "plain", "-n", namespace, "-p", label)  # the platform
        data = json.dumps({"stringData": {"password": "rotated"}})
        as_tenant("patch", "secret", "plain", "-p", data)
        widen = json.dumps({"metadata": {"annotations": {ENDPOINTS: "evil.example.com"}}})
        message = refused(lambda: as_tenant("patch", "secret", "plain", "-p", widen)) or ""
        assert REFUSED in message
        relabel = json.dumps({"metadata": {"labels": {"sluice.dev/usable": "yes"}}})
        assert refused(lambda: as_tenant("patch", "secret", "plain", "-p", relabel))
        unlabel = json.dumps({"metadata": {"labels": {"sluice.dev/usable": None}}})
        as_tenant("patch", "secret", "plain", "-p", unlabel)  # consent taken away
        stored = json.loads(kubectl("get", "secret", "plain", "-n", namespace, "-o", "json"))
        assert "sluice.dev/usable" not in (stored["metadata"].get("labels") or {})
    finally:
        kubectl("delete", "namespace", namespace, "--wait=false")
