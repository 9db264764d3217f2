"""Secrets and ConfigMaps of a pod's namespace, read from the API for its env.

One instance serves one pass over one pod, so each object is read at most once per
container start and never cached across starts (a changed Secret is seen on restart,
as with a kubelet).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping

from kubernetes.client import CoreV1Api
from kubernetes.client.exceptions import ApiException

from sluice_dev.nodeagent.podspec import ConfigError

TIMEOUT = 10.0


class ApiSources:
    def __init__(self, core: CoreV1Api, namespace: str) -> None:
        self._core = core
        self._namespace = namespace
        self._secrets: dict[str, Mapping[str, str] | None] = {}
        self._config_maps: dict[str, Mapping[str, str] | None] = {}

    def secret(self, name: str) -> Mapping[str, str] | None:
        if name not in self._secrets:
            self._secrets[name] = self._read_secret(name)
        return self._secrets[name]

    def config_map(self, name: str) -> Mapping[str, str] | None:
        if name not in self._config_maps:
            self._config_maps[name] = self._read_config_map(name)
        return self._config_maps[name]

    def _read_secret(self, name: str) -> Mapping[str, str] | None:
        try:
            secret = self._core.read_namespaced_secret(
                name, self._namespace, _request_timeout=TIMEOUT
            )
        except ApiException as err:
            _raise_unless_missing(err, "secret", name)
            return None
        data = secret.data or {}
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in data.items()}

    def _read_config_map(self, name: str) -> Mapping[str, str] | None:
        try:
            config_map = self._core.read_namespaced_config_map(
                name, self._namespace, _request_timeout=TIMEOUT
            )
        except ApiException as err:
            _raise_unless_missing(err, "configmap", name)
            return None
        return dict(config_map.data or {})


def _raise_unless_missing(err: ApiException, kind: str, name: str) -> None:
    """A missing object reads as ``None``; any other failure is a config error."""
    if err.status != 404:
        raise ConfigError(f"cannot read {kind} {name}: {err.status} {err.reason}") from err
