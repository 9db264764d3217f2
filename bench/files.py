"""The results on disk: ``<stamp>.json`` and ``<stamp>.md`` under the results
directory, for a run and for the summary of the runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write(doc: Mapping[str, Any], text: str, results: Path) -> tuple[Path, Path]:
    """``<stamp>.json`` (the document) and ``<stamp>.md`` (``text``) under ``results``."""
    results.mkdir(parents=True, exist_ok=True)
    data, table = results / f"{doc['stamp']}.json", results / f"{doc['stamp']}.md"
    data.write_text(json.dumps(doc, indent=2) + "\n")
    table.write_text(text)
    return data, table
