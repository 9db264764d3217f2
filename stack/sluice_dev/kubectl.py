"""``kubectl`` against the local stack, as a user runs it: the demo and the
end-to-end tests apply manifests and read pipelines through it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice_dev.paths import Layout
from sluice_dev.servers import kube


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message holds the command and its stderr."""


@dataclass(frozen=True)
class Kubectl:
    layout: Layout
    timeout: float = 240.0

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        """Run ``kubectl ARGS`` with the stack's kubeconfig; returns its stdout."""
        argv = [str(kube.kubectl(self.layout)), f"--kubeconfig={self.layout.kubeconfig}", *args]
        done = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=self.timeout
        )
        if done.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def cluster_id(self) -> str:
        """The cluster's identity as the operator takes it (its ``clusterid``): the
        UID of the kube-system Namespace; drivers key their checkpoint by it."""
        return self("get", "namespace", "kube-system", "-o", "jsonpath={.metadata.uid}").strip()

    def apply(self, body: Mapping[str, Any]) -> str:
        """``kubectl apply -f -`` of one object."""
        return self("apply", "-f", "-", stdin=json.dumps(body))
