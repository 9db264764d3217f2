"""The repository's pinned, hashed requirement files, read and cross-checked.

``make constraints`` writes five files with uv: ``constraints.txt`` (the development
environment), ``job/requirements.txt`` and ``operator/requirements.txt`` (what each
image installs), ``build-constraints.txt`` (the build backend of the repository's own
packages) and ``requirements-uv.txt`` (uv). Every install requires their hashes
(``--require-hashes``), so a pin without a hash, or an image list that disagrees with
``constraints.txt``, would either fail a build or let one distribution through
unchecked. The functions here find those mistakes before an install does; they are
purely computational (text in, findings out), and the unit tests read the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from sluice_dev.paths import REPO_ROOT

CONSTRAINTS: Final = REPO_ROOT / "constraints.txt"
IMAGE_REQUIREMENTS: Final = {
    "job": REPO_ROOT / "job" / "requirements.txt",
    "operator": REPO_ROOT / "operator" / "requirements.txt",
}
BUILD_CONSTRAINTS: Final = REPO_ROOT / "build-constraints.txt"
UV_REQUIREMENTS: Final = REPO_ROOT / "requirements-uv.txt"
OWN: Final = frozenset({"sluice-api", "sluice-job", "sluice-operator", "sluice-dev"})
"""The repository's own distributions: built from the source tree, never pinned."""

_PIN: Final = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
_HASH: Final = re.compile(r"--hash=(?P<digest>sha256:[0-9a-f]{64})")


class PinError(ValueError):
    """A requirement file that an install with ``--require-hashes`` would refuse."""


@dataclass(frozen=True)
class Pin:
    name: str
    """Normalized (PEP 503): lower case, runs of ``-_.`` as ``-``."""
    version: str
    hashes: frozenset[str]


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str, source: str = "requirements") -> dict[str, Pin]:
    """The pins of a file in uv's ``--generate-hashes`` format: ``name==version \\``
    followed by ``--hash=sha256:...`` continuation lines; comments ignored. Any other
    requirement line (a range, a URL, an editable) is an error naming the line."""
    pins: dict[str, Pin] = {}
    current: tuple[str, str] | None = None
    hashes: set[str] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        found = _PIN.match(line)
        if found:
            if current:
                pins[current[0]] = Pin(current[0], current[1], frozenset(hashes))
            current, hashes = (normalize(found["name"]), found["version"]), set()
            hashes.update(h["digest"] for h in _HASH.finditer(line))
        elif line.startswith("--hash=") and current:
            hashes.update(h["digest"] for h in _HASH.finditer(line))
        else:
            raise PinError(
                f"{source}:{number}: {raw.strip()!r} is not an exact pin (name==version)"
            )
    if current:
        pins[current[0]] = Pin(current[0], current[1], frozenset(hashes))
    return pins


def unhashed(pins: Mapping[str, Pin]) -> list[str]:
    """The pins an install with ``--require-hashes`` would refuse: no hash at all."""
    return sorted(f"{p.name}=={p.version}" for p in pins.values() if not p.hashes)


def disagreements(subset: Mapping[str, Pin], full: Mapping[str, Pin]) -> list[str]:
    """Where an image's list differs from ``constraints.txt``: a package it lacks, a
    different version, different hashes. Empty when the image installs exactly the
    development environment's pins."""
    found = []
    for name, pin in sorted(subset.items()):
        other = full.get(name)
        if other is None:
            found.append(f"{name}=={pin.version} is not in constraints.txt")
        elif other.version != pin.version:
            found.append(f"{name}: {pin.version} here, {other.version} in constraints.txt")
        elif other.hashes != pin.hashes:
            found.append(f"{name}=={pin.version}: hashes differ from constraints.txt")
    return found


def unpinned(requirements: Iterable[str], pins: Mapping[str, Pin]) -> list[str]:
    """Requirements (PEP 508 strings, e.g. from a pyproject.toml) whose distribution
    has no pin: an install would refuse them. The repository's own are exempt."""
    names = {normalize(re.split(r"[\s\[<>=!~;(@]", r.strip(), maxsplit=1)[0]) for r in requirements}
    return sorted(n for n in names - OWN if n not in pins)
