"""Entry point of the stand-in driver (see the package docstring)."""

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

config = json.loads(os.environ["SLUICE_CONFIG"])
options = config.get("transform", {}).get("options", {}).get("standin", {})
epoch = int(os.environ["SLUICE_EPOCH"])
termination = Path(os.environ.get("SLUICE_TERMINATION_LOG", "/dev/termination-log"))
stop = threading.Event()
started = time.monotonic()


def leave(code: int, reason: str, message: str) -> None:
    batches = int(time.monotonic() - started)  # one pretend batch per second
    document = {
        "exitCode": code,
        "reason": reason,
        "message": message,
        "lastBatchId": batches,
        "epoch": epoch,
        "image": config.get("image"),
    }
    termination.write_text(json.dumps(document))
    print(json.dumps({"event": "exit", **document}), flush=True)
    sys.exit(code)


signal.signal(signal.SIGTERM, lambda *_: stop.set())
print(json.dumps({"event": "started", "epoch": epoch, "image": config.get("image")}), flush=True)
if "exitCode" in options:
    stop.wait(float(options.get("afterSeconds", 1)))
    code = int(options["exitCode"])
    leave(code, "StandIn", str(options.get("message", f"stand-in exit {code}")))
stop.wait()
leave(0, "Stopped", "clean stop after SIGTERM")
