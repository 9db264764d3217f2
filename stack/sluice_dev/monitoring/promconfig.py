"""The config reloader's pure steps: from the operator's generated Secret and rule
ConfigMaps to the files Prometheus reads.

In a cluster the operator's Prometheus pod mounts the rule ConfigMaps at
``/etc/prometheus/rules/<ConfigMap>/`` and its ``config-reloader`` sidecar unzips
``prometheus.yaml.gz`` from the Secret, expands ``$(POD_NAME)`` and ``$(SHARD)``
from its environment and asks Prometheus to reload. Here Prometheus is a process,
so the rules go to a directory of the stack's and the configuration's
``rule_files`` are pointed there: the same mount, by path. Nothing else in the
configuration is touched.

Pure: :mod:`sluice_dev.monitoring.reloader` reads the objects and writes the files.
"""

from __future__ import annotations

import base64
import gzip
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import yaml

CONFIG_KEY: Final = "prometheus.yaml.gz"
RULES_MOUNT: Final = "/etc/prometheus/rules"
"""Where the operator's pods mount the rule ConfigMaps (``prompkg.RulesDir``)."""
CONFIG_FILE: Final = "prometheus.yaml"
RULES_DIR: Final = "rules"

INITIAL: Final = """\
# Until the Prometheus Operator's configuration arrives (sluice_dev.monitoring.reloader).
global:
  scrape_interval: 5s
  evaluation_interval: 5s
"""

_ENV_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


class ConfigError(ValueError):
    """The operator's Secret does not hold a configuration this can read."""


def pod_env(prometheus: str, shard: int = 0) -> dict[str, str]:
    """What the reloader's environment would hold in the operator's pod of
    ``prometheus`` (StatefulSet ``prometheus-<name>``, replica 0)."""
    return {"POD_NAME": f"prometheus-{prometheus}-{shard}", "SHARD": str(shard)}


def decode_config(secret: Mapping[str, Any]) -> str:
    """The YAML of the operator's Secret ``prometheus-<name>`` (base64 of gzip)."""
    data = secret.get("data") or {}
    if CONFIG_KEY not in data:
        raise ConfigError(f"the Secret has no {CONFIG_KEY} (keys: {sorted(data)})")
    return gzip.decompress(base64.b64decode(data[CONFIG_KEY])).decode()


def expand(text: str, env: Mapping[str, str]) -> str:
    """``$(NAME)`` replaced by ``env[NAME]``, as the reloader does; references to
    names ``env`` lacks are left as they are."""
    return _ENV_REFERENCE.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def localize(config: str, rules_dir: str) -> str:
    """``config`` with each ``rule_files`` entry under the pods' mount moved under
    ``rules_dir``; everything else unchanged (dumped back in its own key order)."""
    document = yaml.safe_load(config) or {}
    files = document.get("rule_files") or []
    document["rule_files"] = [_moved(str(path), rules_dir) for path in files] or None
    if document["rule_files"] is None:
        del document["rule_files"]
    return str(yaml.safe_dump(document, sort_keys=False))


def _moved(path: str, rules_dir: str) -> str:
    if path.startswith(RULES_MOUNT + "/"):
        return rules_dir.rstrip("/") + path[len(RULES_MOUNT) :]
    return path


def rule_files(config_maps: Iterable[Mapping[str, Any]], prefix: str) -> dict[str, str]:
    """``<ConfigMap>/<key>`` -> text for every rule ConfigMap of the operator's
    (named ``prefix`` + shard index), as a pod would see them mounted."""
    files: dict[str, str] = {}
    for config_map in config_maps:
        name = config_map["metadata"]["name"]
        if not name.startswith(prefix):
            continue
        for key, text in (config_map.get("data") or {}).items():
            files[f"{name}/{key}"] = text
    return files


def render(
    secret: Mapping[str, Any],
    config_maps: Iterable[Mapping[str, Any]],
    *,
    prefix: str,
    rules_dir: str,
    env: Mapping[str, str],
) -> dict[str, str]:
    """Every file Prometheus reads, by path relative to its configuration directory:
    ``prometheus.yaml`` and ``rules/<ConfigMap>/<key>``."""
    config = localize(expand(decode_config(secret), env), rules_dir)
    files = {CONFIG_FILE: config}
    for path, text in rule_files(config_maps, prefix).items():
        files[f"{RULES_DIR}/{path}"] = text
    return files
