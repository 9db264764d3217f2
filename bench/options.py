"""A bench's command line, made from its settings dataclass: one ``--name`` option per
field (typed as its default), ``--results`` for where the results go. Shared by the
handover and failover benches, whose settings differ only in their fields."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def parse(settings: type[T], prog: str, description: str | None, argv: Sequence[str] | None) -> T:
    """``settings`` with the fields given on the command line replaced."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    base: Any = settings()
    for field in dataclasses.fields(base):
        if field.name != "results":
            option = "--" + field.name.replace("_", "-")
            parser.add_argument(option, type=type(getattr(base, field.name)))
    parser.add_argument("--results", type=Path, default=None)
    given = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    return settings(**given)
