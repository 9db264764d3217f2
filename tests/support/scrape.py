"""Scraping a driver's Prometheus endpoint the way Prometheus does: over HTTP, in
the text exposition format, parsed by prometheus-client's own parser."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Labels = dict[str, str]


@dataclass(frozen=True)
class Scrape:
    samples: tuple[tuple[str, Labels, float], ...]

    def value(self, name: str, **labels: str) -> float | None:
        """The one sample ``name`` whose labels include ``labels``, if any."""
        found = self.all(name, **labels)
        if len(found) > 1:
            raise AssertionError(f"{len(found)} samples of {name} match {labels}")
        return found[0][1] if found else None

    def all(self, name: str, **labels: str) -> list[tuple[Labels, float]]:
        return [
            (have, value)
            for sample, have, value in self.samples
            if sample == name and labels.items() <= have.items()
        ]


def scrape(port: int) -> Scrape:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return Scrape(
        tuple(
            (sample.name, dict(sample.labels), sample.value)
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        )
    )
