"""A worker's machine lost at once and booted again, as a power cut gives it.

The crash kills (SIGKILL) the worker's kubelet and containerd, then every process of
its pods and their containerd shims: the node's heartbeats stop, and every
connection to its pods is gone with the processes that held them (their peers see
the reset). What a reboot clears goes too: the runtime state under the worker's run
directory (tmpfs on a real machine) and the mounts of its containers and volumes.
What a disk keeps stays: containerd's images and metadata, the kubelet's pod
directories. The boot starts containerd and the kubelet again: they find the pods'
containers dead, and the kubelet makes what the API server still assigns to the node
anew (and removes what was deleted meanwhile), as after a real reboot. The worker's
network namespace, its machine's link, stays.
"""

from __future__ import annotations

import shutil

from sluice_dev import stack
from sluice_dev.paths import Layout
from sluice_dev.realnode import runtime
from sluice_dev.realnode.plan import Worker
from sluice_dev.realnode.servers import containerd_name, kubelet_name
from sluice_dev.stack import Say


def crash(layout: Layout, worker: Worker) -> int:
    """The worker's machine gone: how many of its pods' processes died with it."""
    stack.stop(layout, kubelet_name(worker.index), kill=True)
    stack.stop(layout, containerd_name(worker.index), kill=True)
    runtime.kill_shims(worker)
    killed = runtime.kill_pods(worker)
    runtime.unmount(worker)
    shutil.rmtree(worker.run, ignore_errors=True)
    return killed


def boot(layout: Layout, worker: Worker, say: Say) -> None:
    """The crashed worker back: its containerd and kubelet started, the node Ready."""
    stack.up(layout, [containerd_name(worker.index), kubelet_name(worker.index)], say=say)
