"""Container images mapped to local code roots.

Nothing can pull an image here, so an image name stands for a directory on this
machine. The container's process runs with that directory as its default working
directory and with it prepended to ``PYTHONPATH`` (ahead of the venv's site-packages),
so a pod "upgraded" from image A to image B imports the code under B's directory.
The rest of an image's configuration is files in its code root: ``image.env`` (its
``ENV``), ``image.entrypoint`` and ``image.cmd`` (its ``ENTRYPOINT`` and ``CMD``), see
:mod:`sluice_dev.nodeagent.podspec`.

Entries come from ``--image-root IMAGE=DIR`` flags and from a JSON file (``--images``,
``{"image": "/dir" or null}``) that is re-read at every container start, so a test can
register an image while the agent runs (see :func:`register`). The file wins over the
flags. Lookup order: the exact reference (``sluice-job:2``), then the reference without
tag or digest (``sluice-job``), then ``"*"``. ``null`` means "a known image without a
code root". An image with no entry, or whose directory does not exist, fails like an
unpullable image (``ErrImagePull``), and the agent retries it, as a kubelet would.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sluice_dev.filelock import locked

WILDCARD = "*"


class ImageError(Exception):
    """The image cannot be "pulled": no mapping, or its directory is missing."""


def repository(image: str) -> str:
    """``registry:5000/team/app:1.2@sha256:..`` -> ``registry:5000/team/app``."""
    name = image.split("@", 1)[0]
    colon, slash = name.rfind(":"), name.rfind("/")
    return name[:colon] if colon > slash else name


@dataclass(frozen=True)
class ImageMap:
    """Static entries plus an optional JSON file re-read on every lookup."""

    static: Mapping[str, str | None] = field(default_factory=dict)
    file: Path | None = None

    def entries(self) -> dict[str, str | None]:
        merged = dict(self.static)
        if self.file is not None and self.file.exists():
            merged.update(_read(self.file))
        return merged

    def resolve(self, image: str) -> Path | None:
        """The code root of ``image`` (``None``: no code root); raises :class:`ImageError`."""
        entries = self.entries()
        for key in (image, repository(image), WILDCARD):
            if key in entries:
                root = entries[key]
                if root is None:
                    return None
                path = Path(root)
                if not path.is_dir():
                    raise ImageError(f"image {image!r} maps to {root}, which is not a directory")
                return path
        raise ImageError(f"image {image!r} is not mapped to a code root (known: {sorted(entries)})")


def parse_flag(text: str) -> tuple[str, str | None]:
    """``IMAGE=DIR`` (or ``IMAGE=`` for no code root) -> ``(IMAGE, DIR | None)``."""
    image, sep, root = text.partition("=")
    if not sep or not image:
        raise ValueError(f"expected IMAGE=DIR, got {text!r}")
    return image, (root or None)


def register(file: Path, image: str, root: Path | None) -> None:
    """Add or replace one entry of the JSON image file, atomically and under a lock."""
    file.parent.mkdir(parents=True, exist_ok=True)
    with locked(file):
        entries = _read(file) if file.exists() else {}
        entries[image] = None if root is None else str(root)
        staging = file.with_name(file.name + ".tmp")
        staging.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
        os.replace(staging, file)


def _read(file: Path) -> dict[str, str | None]:
    data = json.loads(file.read_text() or "{}")
    if not isinstance(data, dict):
        raise ImageError(f"{file} must hold a JSON object of image -> directory")
    return {str(k): (None if v is None else str(v)) for k, v in data.items()}
