"""``python -m sluice_dev.monitoring``: the ``monitoring`` server's process, which
runs the config reloader (:mod:`.reloader`) and the EndpointSlice stand-in
(:mod:`.slicesync`) once a cycle until SIGTERM. A failed step is logged and tried
again next cycle; one never stops the other."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from sluice_dev.monitoring.apply import ApplyError
from sluice_dev.monitoring.kubeapi import UnavailableError
from sluice_dev.monitoring.promconfig import ConfigError
from sluice_dev.monitoring.reloader import Reloader
from sluice_dev.monitoring.slicesync import SliceSync
from sluice_dev.paths import Layout

log = logging.getLogger("sluice_dev.monitoring")


def _step(name: str, run: Callable[[], object]) -> None:
    try:
        run()
    except (UnavailableError, ApplyError, ConfigError) as err:
        log.warning("%s: %s", name, err)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice_dev.monitoring")
    parser.add_argument("--identity", required=True, help="the stack's client identity (PKI stem)")
    parser.add_argument("--conf", type=Path, required=True, help="Prometheus's configuration dir")
    parser.add_argument("--prometheus", required=True, help="Prometheus's URL")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between cycles")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    layout = Layout.from_env()
    reloader = Reloader(layout, args.identity, args.conf, args.prometheus)
    slices = SliceSync(layout, args.identity)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log.info("monitoring: reloading %s, keeping EndpointSlices", args.conf)
    while not stop.is_set():
        _step("endpointslices", slices.once)
        _step("reloader", reloader.once)
        stop.wait(args.interval)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
