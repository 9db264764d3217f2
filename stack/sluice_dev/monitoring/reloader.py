"""The config reloader of the stack's Prometheus: the part of the operator's pod that
upstream's ``prometheus-config-reloader`` sidecar and the kubelet's volume mounts
play in a cluster.

Each cycle reads the Secret ``prometheus-sluice`` and the rule ConfigMaps the
Prometheus Operator generated in ``sluice-monitoring``, renders the files Prometheus
reads (:func:`sluice_dev.monitoring.promconfig.render`), writes them when they differ
from what is on disk, and asks Prometheus to reload (``POST /-/reload``) whenever
what it last loaded differs. A refused reload (a configuration Prometheus rejects)
is logged with Prometheus's answer and retried each cycle. After the first
successful reload it writes ``synced`` beside the configuration: the ``monitoring``
server's health.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from sluice_dev.monitoring import promconfig, resources
from sluice_dev.monitoring.kubeapi import UnavailableError, get_json
from sluice_dev.paths import Layout
from sluice_dev.servers import kube

log = logging.getLogger(__name__)

SYNCED: Final = "synced"


def digest(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def on_disk(conf: Path) -> dict[str, str]:
    """The files of a previous cycle: the configuration and every rule file."""
    files: dict[str, str] = {}
    config = conf / promconfig.CONFIG_FILE
    if config.exists():
        files[promconfig.CONFIG_FILE] = config.read_text()
    rules = conf / promconfig.RULES_DIR
    if rules.is_dir():
        for path in sorted(rules.rglob("*")):
            if path.is_file():
                files[str(path.relative_to(conf))] = path.read_text()
    return files


def write(conf: Path, files: dict[str, str]) -> None:
    """Replace the rule files, then the configuration (each file atomically), so a
    reload never reads a configuration whose rule files are not there yet."""
    rules = conf / promconfig.RULES_DIR
    staging = conf / (promconfig.RULES_DIR + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, text in files.items():
        if name.startswith(promconfig.RULES_DIR + "/"):
            target = staging / name.removeprefix(promconfig.RULES_DIR + "/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    shutil.rmtree(rules, ignore_errors=True)
    staging.rename(rules)
    kube.write_if_changed(conf / promconfig.CONFIG_FILE, files[promconfig.CONFIG_FILE])


def reload(prometheus_url: str) -> None:
    request = urllib.request.Request(f"{prometheus_url}/-/reload", data=b"", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            answer.read()
    except urllib.error.HTTPError as err:
        reason = err.read()[-1000:].decode(errors="replace").strip()
        raise UnavailableError(f"Prometheus refused the reload ({err.code}): {reason}") from err
    except (OSError, urllib.error.URLError) as err:
        raise UnavailableError(f"Prometheus unreachable for /-/reload: {err}") from err


@dataclass
class Reloader:
    """One cycle at a time (:meth:`once`); remembers what Prometheus last loaded."""

    layout: Layout
    identity: str
    conf: Path
    prometheus_url: str
    loaded: str | None = field(default=None)

    def once(self) -> bool:
        """Sync once; True when Prometheus reloaded a changed configuration."""
        namespace = f"/api/v1/namespaces/{resources.NAMESPACE}"
        secret = get_json(
            self.layout, self.identity, f"{namespace}/secrets/{resources.config_secret()}"
        )
        if secret is None:
            return False  # the operator has not generated it yet
        config_maps = get_json(self.layout, self.identity, f"{namespace}/configmaps") or {}
        files = promconfig.render(
            secret,
            config_maps.get("items") or [],
            prefix=resources.rule_config_map_prefix(),
            rules_dir=str(self.conf / promconfig.RULES_DIR),
            env=promconfig.pod_env(resources.PROMETHEUS),
        )
        wanted = digest(files)
        if wanted == self.loaded:
            return False
        if on_disk(self.conf) != files:
            write(self.conf, files)
        reload(self.prometheus_url)
        self.loaded = wanted
        (self.conf / SYNCED).write_text(f"{wanted}\n")
        rules = sum(1 for name in files if name != promconfig.CONFIG_FILE)
        log.info("prometheus reloaded: configuration %s, %d rule file(s)", wanted, rules)
        return True


def synced(conf: Path) -> str | None:
    """Why the reloader has not yet had Prometheus load the operator's configuration
    (``None`` once it has)."""
    if (conf / SYNCED).exists():
        return None
    return f"no configuration from the Prometheus Operator loaded yet ({conf / SYNCED} missing)"
