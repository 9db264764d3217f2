"""The dashboard's queries asked of Prometheus as a panel asks them: a range query
over a window, at a step. One :class:`Answer` per query: its series, each named by
the panel's legend, with its points."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from sluice_dev.dashboard import queries as panels
from sluice_dev.dashboard.queries import Query, legend, rate_interval, substitute
from sluice_dev.monitoring import client

Point = tuple[float, float]


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[Point, ...]


@dataclass(frozen=True)
class Answer:
    query: Query
    promql: str
    """What was sent: the expression with the dashboard's variables replaced."""
    series: tuple[Series, ...]
    error: str = ""

    @property
    def has_data(self) -> bool:
        return any(s.points for s in self.series)


def ask(
    url: str,
    queries: Sequence[Query],
    *,
    pipeline: str = ".*",
    minutes: float = 15,
    step: float = 15,
    scrape_seconds: float = 5,
    end: float | None = None,
) -> list[Answer]:
    """Each query over the last ``minutes`` (to ``end``, default now) at ``step``
    seconds, ``$pipeline`` = ``pipeline`` (a regular expression)."""
    stop = time.time() if end is None else end
    rate = rate_interval(scrape_seconds, step)
    answers = []
    for query in queries:
        promql = substitute(query.expr, pipeline=pipeline, rate=rate)
        try:
            result = client.query_range(url, promql, stop - minutes * 60, stop, step)
        except client.ApiError as err:
            answers.append(Answer(query, promql, (), str(err)))
            continue
        series = tuple(
            Series(
                legend(query.legend, item["metric"]),
                tuple((float(t), float(v)) for t, v in item["values"]),
            )
            for item in result
        )
        answers.append(Answer(query, promql, series))
    return answers


def every_query_since(url: str, pipeline: str, since: float, step: float = 15) -> list[Answer]:
    """Every query of the chart's dashboard for exactly ``pipeline`` (``namespace/name``)
    from the Unix time ``since`` to now: what the demo and the alert test check has
    data."""
    minutes = (time.time() - since) / 60
    every = panels.queries(panels.load())
    return ask(url, every, pipeline=panels.exactly(pipeline), minutes=minutes, step=step)
