"""Many drivers in one process, well-behaved until told to turn hostile:
``python -m tests.support.hostile_drivers COUNT NAMESPACE COUNTS_FILE``.

A driver's ``/metrics`` and control port are a tenant's code. Running a thousand
stand-in processes would take gigabytes, so one asyncio process listens on the
metrics and control ports of ``COUNT`` pod addresses (:func:`address`, the ones
``hostile_node`` gives its pods). At first each answers ``/metrics`` as an idle running
driver does (its epoch, its last batch, no lag), so a test can
measure what a thousand idle pipelines cost the operator by themselves. After a line
``hostile`` on its standard input, each misbehaves in one of four ways, by the
pipeline's index modulo 4 (:data:`MODES`):

* ``trickle``: ``200 OK``, then a header line every 0.5 s, never the end of the head;
* ``continue``: ``100 Continue`` every 0.5 s, forever (``http.client`` loops over it);
* ``silent``: accepts the connection and never answers;
* ``liar``: answers ``/metrics`` at once, saying it is a promoted standby still
  waiting (epoch 1, ``sluice_standby_ready`` 1), so the operator sends it its
  promotion again and again, and its control port never answers.

Every connection accepted is counted per mode (``idle`` before), and the counts are written to
``COUNTS_FILE`` (JSON) every second, so a test sees the operator keep asking. The
process exits when its standard input closes (the test ended).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Final

METRICS_PORT: Final = 8090
CONTROL_PORT: Final = 8091
MODES: Final = ("trickle", "continue", "silent", "liar")
NAME_PREFIX: Final = "hostile-"


def address(index: int) -> str:
    """The pod address of hostile pipeline ``index``: 127.250.x.y, outside the stack's
    servers (127.0.0.x)."""
    return f"127.250.{index // 250}.{index % 250 + 1}"


def mode(index: int) -> str:
    return MODES[index % len(MODES)]


def name(index: int) -> str:
    return f"{NAME_PREFIX}{index}"


def index_of(pipeline: str) -> int | None:
    suffix = pipeline.removeprefix(NAME_PREFIX)
    return int(suffix) if pipeline.startswith(NAME_PREFIX) and suffix.isdigit() else None


def answer(body: bytes) -> bytes:
    return f"HTTP/1.0 200 OK\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


STARTED: Final = int(time.time())


def running(namespace: str, index: int) -> bytes:
    """An idle running driver's exposition: epoch 1, batch 7 committed at start."""
    label = f'pipeline="{namespace}/{name(index)}"'
    lines = [
        f"sluice_epoch{{{label}}} 1",
        f"sluice_last_committed_batch_id{{{label}}} 7",
        f"sluice_last_commit_timestamp_seconds{{{label}}} {STARTED}",
        f"sluice_batches_total{{{label}}} 7",
        f'sluice_consumer_lag{{{label},topic="unused",partition="0"}} 0',
    ]
    return answer(("\n".join(lines) + "\n").encode())


def lie(namespace: str, index: int) -> bytes:
    label = f'{{pipeline="{namespace}/{name(index)}"}}'
    return answer(f"sluice_epoch{label} 1\nsluice_standby_ready{label} 1\n".encode())


class Drivers:
    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.counts: Counter[str] = Counter()
        self.hostile = False

    def handler(self, index: int, port: int):  # type: ignore[no-untyped-def]
        how = mode(index)

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await asyncio.wait_for(reader.read(4096), 5)
                if not self.hostile:
                    self.counts[f"idle:{port}"] += 1
                    if port == METRICS_PORT:
                        writer.write(running(self.namespace, index))
                        await writer.drain()
                    return
                self.counts[f"{how}:{port}"] += 1
                if how == "liar" and port == METRICS_PORT:
                    writer.write(lie(self.namespace, index))
                    await writer.drain()
                elif how == "trickle":
                    writer.write(b"HTTP/1.1 200 OK\r\n")
                    while True:
                        await asyncio.sleep(0.5)
                        writer.write(b"X-Trickle: still here\r\n")
                        await writer.drain()
                elif how == "continue":
                    while True:
                        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                        await writer.drain()
                        await asyncio.sleep(0.5)
                else:  # silent, and the liar's control port
                    await reader.read()  # until the operator gives up
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        return serve


async def main(count: int, namespace: str, counts_file: Path) -> None:
    drivers = Drivers(namespace)
    servers = []
    for index in range(count):
        for port in (METRICS_PORT, CONTROL_PORT):
            servers.append(
                await asyncio.start_server(drivers.handler(index, port), address(index), port)
            )
    loop = asyncio.get_running_loop()

    def commands() -> None:
        for line in sys.stdin:
            if line.strip() == "hostile":
                loop.call_soon_threadsafe(setattr, drivers, "hostile", True)

    closed = loop.run_in_executor(None, commands)
    print("listening", flush=True)
    while not closed.done():
        counts_file.write_text(json.dumps(drivers.counts))
        await asyncio.wait({closed}, timeout=1.0)
    for server in servers:
        server.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], Path(sys.argv[3])))
