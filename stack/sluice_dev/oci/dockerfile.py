"""The parts of a Dockerfile that the image build and the tests read.

Instructions with continuation lines joined and comments dropped, split into stages
with the global ``ARG`` defaults; what the build context must hold (each ``COPY``
source that does not come from another stage). Not a full Dockerfile parser:
heredocs and JSON-form COPY are not read, and the product's Dockerfiles use
neither.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]


@dataclass
class Dockerfile:
    args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def expand(self, text: str) -> str:
        return re.sub(r"\$\{(\w+)\}", lambda m: self.args.get(m[1], m[0]), text)

    def context_sources(self) -> list[str]:
        """Every path the build copies from its context, in the order written."""
        sources = []
        for stage in self.stages:
            for copy in stage.all("COPY"):
                words = [w for w in shlex.split(copy) if not w.startswith("--")]
                if any(w.startswith("--from") for w in shlex.split(copy)):
                    continue
                sources.extend(words[:-1])
        return sources


def parse(path: Path) -> Dockerfile:
    """Instructions with continuation lines joined and comments dropped."""
    logical, pending = [], ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(re.sub(r"\s+", " ", pending + line))
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        elif keyword == "ARG" and not stages and "=" in rest:
            key, _, value = rest.partition("=")
            args[key] = value
        elif stages:
            stages[-1].instructions.append((keyword, rest.strip()))
    return Dockerfile(args, stages)
