"""``python -m bench``: run the benchmark ``--runs`` times, then print and save the
results of each run and their summary (medians).

Exit code 0 when the results are written (whatever the figures: targets are
reported, never asserted), 1 when a contender, the ceiling or the stack failed (the
runs completed before the failure are still written and summarised).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import files, markdown, plot, report, summary
from bench.ceiling import CeilingFailedError
from bench.contenders import ContenderFailedError
from bench.run import run
from bench.settings import Settings, from_args


def say(line: str) -> None:
    print(f"[bench {datetime.now():%H:%M:%S}] {line}", flush=True)


def one_run(settings: Settings, index: int, tell: Callable[[str], None]) -> dict[str, Any]:
    """Runs the benchmark once; writes and returns its results document."""
    tell(f"run {index + 1} of {settings.runs}")
    started, load_before = datetime.now(UTC), os.getloadavg()
    outcome = run(settings, tell)
    doc = report.build(settings, outcome, started, load_before)
    data, table = files.write(doc, markdown.markdown(doc), settings.results)
    picture = plot.draw(doc, settings.results / f"{doc['stamp']}.png")
    tell(f"run {index + 1}: {data}, {table}, {picture}; logs: {outcome.logs}")
    return doc


def summarise(docs: Sequence[Mapping[str, Any]], results: Path) -> str:
    """Writes the summary of ``docs`` (JSON, Markdown, the median run's plot); returns
    its Markdown."""
    found = summary.build(docs)
    text = summary.to_markdown(found)
    data, table = files.write(found, text, results)
    middle = docs[summary.median_run(docs)]
    picture = plot.draw(middle, results / f"{found['stamp']}.png")
    say(f"summary: {data}, {table}, {picture}")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    settings = from_args(argv)
    say(f"{settings.label} run: {settings.public()}")
    docs: list[dict[str, Any]] = []
    failed = False
    for index in range(settings.runs):
        try:
            docs.append(one_run(settings, index, say))
        except (ContenderFailedError, CeilingFailedError) as err:
            print(f"bench: run {index + 1}: {err}", file=sys.stderr)
            failed = True
            break
    if docs:
        text = summarise(docs, settings.results)
        print()
        print(text)
    return 1 if failed else 0
