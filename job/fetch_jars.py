"""Fetch the job image's connector jars, each refused unless its SHA-256 is the listed one.

Dockerfile.job runs this in its build stage (``python3 fetch_jars.py MAVEN LIST DEST``)
instead of ``ADD --checksum``, which only BuildKit has: buildah and podman, and older
Docker builders, would fetch without checking. Standard library only: it runs on the
base image before anything is installed. A jar whose digest differs fails the build
naming the jar, the digest listed and the digest received.
"""

from __future__ import annotations

import hashlib
import sys
import urllib.request
from pathlib import Path


def listed(path: Path) -> list[tuple[str, str]]:
    """(path under the repository, sha256) of each line that is not a comment."""
    entries = []
    for line in path.read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            jar, digest = words
            entries.append((jar, digest.lower()))
    return entries


def fetch(maven: str, jar: str, digest: str, dest: Path) -> Path:
    url = f"{maven.rstrip('/')}/{jar}"
    with urllib.request.urlopen(url, timeout=300) as response:
        body = response.read()
    got = hashlib.sha256(body).hexdigest()
    if got != digest:
        raise SystemExit(f"{url}: sha256 {got}, but jars.txt lists {digest}; refused")
    target = dest / jar.rsplit("/", 1)[1]
    target.write_bytes(body)
    target.chmod(0o644)
    return target


def main(argv: list[str]) -> int:
    maven, listing, dest = argv
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for jar, digest in listed(Path(listing)):
        print(f"{fetch(maven, jar, digest, out)}  sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
