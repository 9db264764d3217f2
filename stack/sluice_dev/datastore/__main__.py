"""``python -m sluice_dev.datastore``: serve the Datastore v1 API until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from sluice_dev import ports
from sluice_dev.datastore import server

log = logging.getLogger("sluice_dev.datastore")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sluice_dev.datastore", description=__doc__)
    parser.add_argument("--host", default=ports.HOST)
    parser.add_argument("--port", type=int, default=ports.DATASTORE, help="gRPC API")
    parser.add_argument(
        "--control-port", type=int, default=ports.DATASTORE_CONTROL, help="HTTP fault switches"
    )
    parser.add_argument("--workers", type=int, default=16, help="gRPC handler threads")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    stopping = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    running = server.start(args.port, args.control_port, host=args.host, workers=args.workers)
    log.info("datastore up: gRPC %s:%d, control %d", args.host, args.port, args.control_port)
    stopping.wait()
    running.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
