"""Sample UI interaction events for tests, the demo and benchmarks.

Events are a pure function of their sequence number (and the seed), so a test can
recompute exactly what the sink must hold. ``bad_every`` makes every n-th record
malformed (not JSON, a missing field or a wrong type, in turn) to exercise the
dead-letter path.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

PAGES = ("/home", "/search", "/cart", "/checkout", "/product/1", "/product/2", "/help")
ACTIONS = ("view", "view", "view", "click", "click", "scroll")
BASE_TS_MS = 1_763_780_400_000  # 2025-11-22T03:00:00Z


@dataclass(frozen=True)
class EventFactory:
    seed: int = 7
    bad_every: int = 0
    events_per_second: int = 100
    """Spacing of event times: ``seq`` n happens at BASE + n / events_per_second."""

    def event(self, seq: int) -> dict[str, object]:
        rng = random.Random(self.seed * 1_000_003 + seq)
        page = rng.choice(PAGES)
        return {
            "event_id": f"e-{self.seed}-{seq}",
            "seq": seq,
            "page": page.upper() + "/?ref=ad" if seq % 11 == 0 else page,
            "action": rng.choice(ACTIONS),
            "user_id": f"u-{rng.randrange(500)}",
            "ts": BASE_TS_MS + seq * 1000 // self.events_per_second,
        }

    def is_bad(self, seq: int) -> bool:
        return self.bad_every > 0 and seq % self.bad_every == self.bad_every - 1

    def record(self, seq: int) -> tuple[bytes, bytes]:
        """Key and value of record ``seq``: the key spreads events over partitions."""
        key = f"k-{seq}".encode()
        if not self.is_bad(seq):
            return key, json.dumps(self.event(seq)).encode()
        kind = (seq // max(1, self.bad_every)) % 3
        if kind == 0:
            return key, b"{not json"
        event = self.event(seq)
        if kind == 1:
            del event["page"]
        else:
            event["ts"] = "yesterday"
        return key, json.dumps(event).encode()


def normalised_page(raw: str) -> str:
    """A page as the example transforms clean it (lower case, no query string, no
    trailing slash): the oracle tests and the demo compare the sink with."""
    cleaned = re.sub(r"/+$", "", re.sub(r"[?#].*$", "", raw.strip().lower()))
    return cleaned or "/"
