"""What a real node runs, built or installed: the kubelet and kube-proxy of the pinned
Kubernetes, the pods' sandbox (pause) image, containerd and the CNI plugins.

The kubelet and kube-proxy are built from the same private module as the control
plane (``stack/go/kubernetes``), with the same version stamps, into an artifact of
their own, built on demand (when a worker first starts), so a machine that never runs
a real node does not build them. The pause
image is Kubernetes' own ``build/pause/linux/pause.c`` from that module, compiled
statically and packed as an OCI image archive here (one layer, ``/pause``, uid 65535)
that containerd imports: no registry is reachable to pull ``registry.k8s.io/pause``.
containerd and the CNI plugins are Debian's packages, like podman and runc.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import subprocess
import tarfile
from pathlib import Path
from typing import Final

from sluice_dev import versions
from sluice_dev.artifacts import Artifact
from sluice_dev.build import BuildError, GoBuild, go_artifact, run
from sluice_dev.paths import Layout
from sluice_dev.servers import kube
from sluice_dev.servers.tools import stamp_flags

PACKAGES: Final = ("containerd", "containernetworking-plugins")
"""Debian packages a real node needs besides those of the image builds (runc)."""

BUILD = GoBuild(
    kube.MODULE,
    ("k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"),
    ldflags=tuple(stamp_flags(kube.version_stamps())),
)
ARTIFACT = go_artifact("kubernetes-node", versions.KUBERNETES, BUILD, on_demand=True)


def kubelet(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "kubelet"


def kube_proxy(layout: Layout) -> Path:
    return ARTIFACT.path(layout) / "bin" / "kube-proxy"


PAUSE_SOURCE: Final = "build/pause/linux/pause.c"
PAUSE_ARCHIVE: Final = "pause.oci.tar"


def _pause_source() -> Path:
    """pause.c in the Go module cache, downloaded with the module if missing."""
    run(["go", "mod", "download", f"k8s.io/kubernetes@v{versions.KUBERNETES}"], cwd=kube.MODULE)
    result = subprocess.run(
        ["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=False
    )
    source = (
        Path(result.stdout.strip()) / f"k8s.io/kubernetes@v{versions.KUBERNETES}" / PAUSE_SOURCE
    )
    if not source.exists():
        raise BuildError(f"{source} not found after downloading k8s.io/kubernetes")
    return source


def _build_pause(target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    binary = target / "pause"
    run(
        [
            "gcc",
            "-Os",
            "-Wall",
            "-Werror",
            "-static",
            "-DVERSION=v3.10-sluice",
            "-o",
            str(binary),
            str(_pause_source()),
        ],
    )
    (target / PAUSE_ARCHIVE).write_bytes(oci_archive(binary.read_bytes()))


def _layer(pause: bytes) -> bytes:
    """A gzipped tar holding ``/pause``, reproducible (fixed times and owners)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("pause")
        info.size, info.mode, info.mtime = len(pause), 0o755, 0
        tar.addfile(info, io.BytesIO(pause))
    return gzip.compress(raw.getvalue(), mtime=0)


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def oci_archive(pause: bytes, ref: str = "3.10", name: str = "localhost/sluice/pause") -> bytes:
    """An OCI image layout, as a tar, of one image running ``/pause`` as 65535."""
    layer = _layer(pause)
    diff_id = "sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()
    config = _blob(
        json.dumps(
            {
                "architecture": "amd64",
                "os": "linux",
                "config": {"User": "65535:65535", "Entrypoint": ["/pause"]},
                "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            },
            sort_keys=True,
        ).encode()
    )
    layer_blob = _blob(layer)
    manifest = _blob(
        json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {
                    "mediaType": "application/vnd.oci.image.config.v1+json",
                    "digest": config[0],
                    "size": len(config[1]),
                },
                "layers": [
                    {
                        "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": layer_blob[0],
                        "size": len(layer_blob[1]),
                    }
                ],
            },
            sort_keys=True,
        ).encode()
    )
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest[0],
                "size": len(manifest[1]),
                "annotations": {
                    "org.opencontainers.image.ref.name": ref,
                    "io.containerd.image.name": f"{name}:{ref}",
                },
            }
        ],
    }
    files = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
        **{f"blobs/sha256/{digest[7:]}": data for digest, data in (config, layer_blob, manifest)},
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, data in files.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


PAUSE = Artifact(
    "pause",
    "3.10",
    _build_pause,
    recipe=(Path(__file__),),
    compiles=True,
    on_demand=True,
)


def pause_archive(layout: Layout) -> Path:
    return PAUSE.path(layout) / PAUSE_ARCHIVE


ARTIFACTS: tuple[Artifact, ...] = (ARTIFACT, PAUSE)
