"""A container of a pod, turned into a local launch plan: argv, environment, cwd.

Pure: Secrets and ConfigMaps come in through :class:`Sources`, the code root and the
per-container files through :class:`Placement`, what the node adds (base
environment, the ``kubernetes`` Service's variables, the default entrypoint) through
:class:`NodeDefaults`, so the kubelet's rules are testable without a cluster. The
rules followed:

* argv, as Kubernetes combines a container with its image: ``command`` replaces the
  image's ENTRYPOINT and CMD (argv = command + args); with only ``args``, argv =
  ENTRYPOINT + args; with neither, ENTRYPOINT + CMD. The image's ENTRYPOINT is the
  JSON array in its code root's :data:`IMAGE_ENTRYPOINT_FILE`, else the agent's
  default (``--default-entrypoint``); its CMD the array in :data:`IMAGE_CMD_FILE`,
  else none (with neither, ``args`` alone are the argv, as Docker runs them). An
  empty argv is a :class:`ConfigError` naming the container;
* environment = the agent's base environment, then the "image" layer (``PYTHONPATH``
  with the code root first, ``HOSTNAME`` = pod name, the code root's
  :data:`IMAGE_ENV_FILE`), then the ``kubernetes`` Service's variables
  (``KUBERNETES_SERVICE_HOST``/``PORT``..., :mod:`.kubeservice`), then ``envFrom``
  in order, then ``env`` in order (later wins), then ``SLUICE_TERMINATION_LOG``;
* ``env`` values and ``command``/``args`` (not the image's words) expand ``$(VAR)``
  from the pod-defined variables, then the Service's (``$$`` escapes, unknown
  references stay as written), like the kubelet;
* ``valueFrom``: ``fieldRef`` (metadata.name/namespace/uid, labels['k'],
  annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP(s): the
  pod's own loopback address from :func:`.podnet.pod_ip`, status.hostIP(s):
  127.0.0.1), ``secretKeyRef`` and ``configMapKeyRef`` with ``optional`` honoured;
  ``resourceFieldRef`` is not supported;
* termination message: the container's ``terminationMessagePath`` (default
  ``/dev/termination-log``) cannot be written here, so every container gets its own
  local file, named in ``SLUICE_TERMINATION_LOG``, and any occurrence of the
  spec's path inside ``command``/``args`` is rewritten to it (so
  ``echo boom > /dev/termination-log`` works unchanged);
* cwd = ``workingDir`` if set (created if missing, as runtimes do), else the code
  root, else the container's scratch directory.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from kubernetes.client import V1Container, V1EnvFromSource, V1EnvVar, V1ObjectMeta, V1Pod

from sluice_dev.nodeagent.podnet import HOST_IP, pod_ip

TERMINATION_LOG_ENV = "SLUICE_TERMINATION_LOG"
DEFAULT_TERMINATION_PATH = "/dev/termination-log"

_ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_LABEL_REF = re.compile(r"metadata\.(labels|annotations)\['(.+)'\]")


class ConfigError(Exception):
    """The container cannot be configured (the kubelet's CreateContainerConfigError)."""


class Sources(Protocol):
    """Where ``secretKeyRef``/``configMapKeyRef``/``envFrom`` values come from."""

    def secret(self, name: str) -> Mapping[str, str] | None: ...

    def config_map(self, name: str) -> Mapping[str, str] | None: ...


@dataclass(frozen=True)
class Placement:
    """Where one container instance lands on this machine."""

    code_root: Path | None
    scratch: Path
    termination_log: Path


@dataclass(frozen=True)
class NodeDefaults:
    """What the node gives every container, whatever its pod says."""

    base_env: Mapping[str, str] = field(default_factory=dict)
    service_env: Mapping[str, str] = field(default_factory=dict)
    """The ``kubernetes`` Service's variables (:mod:`.kubeservice`)."""
    entrypoint: tuple[str, ...] = ()
    """The ENTRYPOINT of an image whose code root names none."""


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path


def launch_plan(
    pod: V1Pod,
    container: V1Container,
    node: NodeDefaults,
    place: Placement,
    sources: Sources,
) -> LaunchPlan:
    pod_env = pod_defined_env(pod, container, sources, node.service_env)
    visible = {**node.service_env, **pod_env}
    message_path = container.termination_message_path or DEFAULT_TERMINATION_PATH

    def local(words: Sequence[str] | None) -> list[str] | None:
        if not words:
            return None
        return [
            expand(word, visible).replace(message_path, str(place.termination_log))
            for word in words
        ]

    entrypoint, cmd = image_command(place.code_root, node.entrypoint)
    argv = tuple(combine(local(container.command), local(container.args), entrypoint, cmd))
    if not argv:
        raise ConfigError(
            f"container {container.name!r} has no command and its image no entrypoint: "
            f"give the pod a command, or the image an {IMAGE_ENTRYPOINT_FILE} file"
        )
    env = {
        **node.base_env,
        **image_env(pod, node.base_env, place.code_root),
        **node.service_env,
        **pod_env,
        TERMINATION_LOG_ENV: str(place.termination_log),
    }
    default_cwd = place.code_root or place.scratch
    cwd = Path(container.working_dir) if container.working_dir else default_cwd
    return LaunchPlan(argv=argv, env=env, cwd=cwd)


def combine(
    command: Sequence[str] | None,
    args: Sequence[str] | None,
    entrypoint: Sequence[str],
    cmd: Sequence[str],
) -> list[str]:
    """Kubernetes' rule for a container's argv: ``command`` replaces the image's
    ENTRYPOINT and CMD; ``args`` alone replace CMD; neither runs ENTRYPOINT + CMD.
    ``None`` and an empty list both mean "not given", as in the API."""
    if command:
        return [*command, *(args or ())]
    if args:
        return [*entrypoint, *args]
    return [*entrypoint, *cmd]


IMAGE_ENTRYPOINT_FILE = "image.entrypoint"
"""In a code root, the image's ENTRYPOINT in exec form: a JSON array of strings,
e.g. ``["python", "-m", "sluice_job"]``. Without it, the agent's default applies."""

IMAGE_CMD_FILE = "image.cmd"
"""In a code root, the image's CMD in exec form (a JSON array); none without it."""


def image_command(
    code_root: Path | None, default_entrypoint: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The image's ``(ENTRYPOINT, CMD)``: its code root's files, else the default
    entrypoint and no CMD."""
    if code_root is None:
        return tuple(default_entrypoint), ()
    entrypoint = read_exec_form(code_root / IMAGE_ENTRYPOINT_FILE)
    cmd = read_exec_form(code_root / IMAGE_CMD_FILE)
    return (
        tuple(default_entrypoint) if entrypoint is None else entrypoint,
        cmd or (),
    )


def read_exec_form(path: Path) -> tuple[str, ...] | None:
    """The JSON array of strings in ``path`` (``None`` if it does not exist)."""
    if not path.is_file():
        return None
    return parse_exec_form(path.read_text(), str(path))


def parse_exec_form(text: str, source: str) -> tuple[str, ...]:
    """A Dockerfile's exec form: a JSON array of strings; ``source`` names it in errors."""
    try:
        words = json.loads(text)
    except ValueError as err:
        raise ConfigError(f"{source}: not JSON ({err})") from err
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ConfigError(f"{source}: expected a JSON array of strings, got {text.strip()!r}")
    return tuple(words)


IMAGE_ENV_FILE = "image.env"
"""In a code root, the image's own environment (a Dockerfile's ``ENV`` lines): one
``NAME=value`` per line, ``#`` comments; e.g. where the job image keeps its jars."""


def image_env(pod: V1Pod, base_env: Mapping[str, str], code_root: Path | None) -> dict[str, str]:
    """What the image would contribute: its code on ``PYTHONPATH``, a hostname, and
    the variables of the code root's :data:`IMAGE_ENV_FILE`."""
    env = {"HOSTNAME": _meta(pod).name or ""}
    if code_root is not None:
        paths = [str(code_root), *filter(None, base_env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env.update(read_image_env(code_root / IMAGE_ENV_FILE))
    return env


def read_image_env(path: Path) -> dict[str, str]:
    """The ``NAME=value`` lines of ``path`` (none if it does not exist)."""
    if not path.is_file():
        return {}
    env: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{path}:{number}: expected NAME=value, got {text!r}")
        env[name.strip()] = value
    return env


def pod_defined_env(
    pod: V1Pod,
    container: V1Container,
    sources: Sources,
    service_env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``envFrom`` then ``env``, with ``$(VAR)`` expansion, as the kubelet builds them:
    a reference looks in the variables defined so far, then in ``service_env``."""
    env: dict[str, str] = {}
    for source in container.env_from or ():
        env.update(_env_from(source, sources))
    for var in container.env or ():
        value = _env_value(pod, var, {**(service_env or {}), **env}, sources)
        if value is not None:
            env[var.name] = value
    return env


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: ``$$`` is a literal ``$``, unknown refs stay."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if text.startswith("$(", i):
            end = text.find(")", i + 2)
            if end != -1:
                name = text[i + 2 : end]
                out.append(env.get(name, text[i : end + 1]))
                i = end + 1
                continue
        out.append(text[i])
        i += 1
    return "".join(out)


def field_value(pod: V1Pod, path: str) -> str:
    """The value of a ``fieldRef.fieldPath`` for ``pod``."""
    meta, spec = _meta(pod), pod.spec
    match = _LABEL_REF.fullmatch(path)
    if match:
        values = (meta.labels if match[1] == "labels" else meta.annotations) or {}
        return values.get(match[2], "")
    simple = {
        "metadata.name": meta.name,
        "metadata.namespace": meta.namespace,
        "metadata.uid": meta.uid,
        "spec.nodeName": spec.node_name if spec else None,
        "spec.serviceAccountName": spec.service_account_name if spec else None,
        "status.podIP": pod_ip(meta.uid) if meta.uid else None,
        "status.podIPs": pod_ip(meta.uid) if meta.uid else None,
        "status.hostIP": HOST_IP,
        "status.hostIPs": HOST_IP,
    }
    if path not in simple:
        raise ConfigError(f"fieldRef {path!r} is not supported by the node agent")
    return simple[path] or ""


def _env_value(
    pod: V1Pod, var: V1EnvVar, defined: Mapping[str, str], sources: Sources
) -> str | None:
    source = var.value_from
    if source is None:
        return expand(var.value or "", defined)
    if source.field_ref is not None:
        return field_value(pod, source.field_ref.field_path)
    if source.secret_key_ref is not None:
        ref = source.secret_key_ref
        return _key(
            "secret", ref.name or "", ref.key, bool(ref.optional), sources.secret(ref.name or "")
        )
    if source.config_map_key_ref is not None:
        ref2 = source.config_map_key_ref
        data = sources.config_map(ref2.name or "")
        return _key("configmap", ref2.name or "", ref2.key, bool(ref2.optional), data)
    raise ConfigError(f"env {var.name!r}: only fieldRef/secretKeyRef/configMapKeyRef are supported")


def _key(
    kind: str, name: str, key: str, optional: bool, data: Mapping[str, str] | None
) -> str | None:
    if data is None:
        if optional:
            return None
        raise ConfigError(f'{kind} "{name}" not found')
    if key not in data:
        if optional:
            return None
        raise ConfigError(f"couldn't find key {key} in {kind} {name}")
    return data[key]


def _env_from(source: V1EnvFromSource, sources: Sources) -> dict[str, str]:
    prefix = source.prefix or ""
    data: Mapping[str, str] | None
    if source.secret_ref is not None:
        name, optional = source.secret_ref.name or "", bool(source.secret_ref.optional)
        data, kind = sources.secret(name), "secret"
    elif source.config_map_ref is not None:
        name, optional = source.config_map_ref.name or "", bool(source.config_map_ref.optional)
        data, kind = sources.config_map(name), "configmap"
    else:
        return {}
    if data is None:
        if optional:
            return {}
        raise ConfigError(f'{kind} "{name}" not found')
    return {prefix + k: v for k, v in data.items() if _ENV_NAME.fullmatch(prefix + k)}


def _meta(pod: V1Pod) -> V1ObjectMeta:
    if pod.metadata is None:
        raise ConfigError("pod has no metadata")
    return pod.metadata
