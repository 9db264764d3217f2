"""Where a pod's log is on the local stack, for ``sluice-dev logs POD``.

Nothing serves the kubelet API here, so ``kubectl logs`` has nothing to reach. The
node agent writes each container's output (stdout and stderr) to
``pods/<namespace>_<pod>_<uid>/<container>/<restart>.log`` under its state directory
(:meth:`.settings.Settings.pod_dir`, :class:`.podrun.ContainerFiles`) and keeps it
after the pod is deleted. :func:`find` picks one of those files as ``kubectl logs``
would pick the log: the newest pod of that name, its only container unless one is
named, its current run or (``previous``) the one before.
"""

from __future__ import annotations

from pathlib import Path


class PodLogError(LookupError):
    """No such log; the message says what there is instead."""


def find(
    state_dir: Path,
    namespace: str,
    pod: str,
    container: str | None = None,
    *,
    previous: bool = False,
) -> Path:
    """The log file of ``container`` of pod ``namespace/pod`` under the agent's
    ``state_dir``; raises :class:`PodLogError` naming what is missing."""
    pod_dir = _newest_pod_dir(state_dir, namespace, pod)
    name = _container(pod_dir, f"{namespace}/{pod}", container)
    runs = sorted(
        (int(log.stem), log) for log in (pod_dir / name).glob("*.log") if log.stem.isdigit()
    )
    wanted = 2 if previous else 1
    if len(runs) < wanted:
        which = "previous run" if previous else "log yet"
        raise PodLogError(f"container {name} of pod {namespace}/{pod} has no {which}")
    return runs[-wanted][1]


def _newest_pod_dir(state_dir: Path, namespace: str, pod: str) -> Path:
    """The directory of the latest pod of that name (a name is reused across uids)."""
    pods = state_dir / "pods"
    found = sorted(pods.glob(f"{namespace}_{pod}_*"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise PodLogError(
            f"no pod {namespace}/{pod} has run on the stack's node agent (looked in {pods}); "
            "the namespace is given with -n"
        )
    return found[-1]


def _container(pod_dir: Path, pod: str, container: str | None) -> str:
    names = sorted(entry.name for entry in pod_dir.iterdir() if entry.is_dir())
    if container is None and len(names) == 1:
        return names[0]
    if container is not None and container in names:
        return container
    choice = ", ".join(names) or "none started yet"
    raise PodLogError(f"pod {pod} has containers: {choice}; name one with -c")
