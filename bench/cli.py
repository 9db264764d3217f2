"""``python -m bench``: run the benchmark, then print and save its results.

Exit code 0 when the results are written (whatever the figures: targets are
reported, never asserted), 1 when a contender or the stack failed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from bench import plot, report
from bench.contenders import ContenderFailedError
from bench.run import run
from bench.settings import from_args


def say(line: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {line}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    settings = from_args(argv)
    started, load_before = datetime.now(UTC), os.getloadavg()
    say(f"{settings.label} run: {settings.public()}")
    try:
        outcome = run(settings, say)
    except ContenderFailedError as err:
        print(f"bench: {err}", file=sys.stderr)
        return 1
    doc = report.build(settings, outcome, started, load_before)
    data, table = report.write(doc, settings.results)
    picture = plot.draw(doc, settings.results / f"{doc['stamp']}.png")
    print()
    print(table.read_text())
    say(f"results: {data}, {table}, {picture}; logs: {outcome.logs}")
    return 0
