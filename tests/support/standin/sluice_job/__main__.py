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


HUGE_BYTES = 1 << 30
TRICKLE_SECONDS = 0.2


def serve_metrics(mode: object, hits: str | None) -> None:
    """The series the operator reads from a driver, one pretend commit per second;
    or, for ``mode`` "huge" and "trickle", what a hostile tenant's image serves."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    label = f'pipeline="{os.environ["SLUICE_NAMESPACE"]}/{os.environ["SLUICE_PIPELINE"]}"'

    def honest() -> bytes:
        batches = int(time.monotonic() - started)
        lines = [f"sluice_epoch{{{label}}} {epoch}"]
        if batches:
            lines.append(f"sluice_last_committed_batch_id{{{label}}} {batches}")
            lines.append(f"sluice_last_commit_timestamp_seconds{{{label}}} {time.time()}")
        if mode == "impostor":
            lines += impostor(f'pipeline="{options["victim"]}"')
        if mode == "many":
            lines += [f'sluice_flood{{i="{i}"}} 1' for i in range(int(options["series"]))]
        return ("\n".join(lines) + "\n").encode()

    def impostor(victim: str) -> list[str]:
        return [
            f"sluice_epoch{{{victim}}} 999",
            f"sluice_last_commit_timestamp_seconds{{{victim}}} 1",
            f'sluice_consumer_lag{{{victim},topic="t",partition="0"}} 1e9',
            f'sluice_dependency_available{{{victim},dependency="cassandra"}} 0',
            f'sluice_operator_pipeline_phase{{{victim},phase="Failed"}} 1',
        ]

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if hits:
                with open(hits, "a") as out:
                    out.write(f"{time.time()} {mode}\n")
            try:
                if mode == "huge":
                    self.huge()
                elif mode == "trickle":
                    self.trickle()
                else:
                    body = honest()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.end_headers()
                    self.wfile.write(body)
            except OSError:
                pass  # the reader hung up: what a hostile server expects

        def huge(self) -> None:
            line = f"sluice_epoch{{{label}}} {epoch}\n".encode()
            chunk = line * (65536 // len(line))
            self.send_response(200)
            self.send_header("Content-Length", str(HUGE_BYTES))
            self.end_headers()
            sent = 0
            while sent < HUGE_BYTES and not stop.is_set():
                self.wfile.write(chunk)
                sent += len(chunk)

        def trickle(self) -> None:
            self.send_response(200)
            self.end_headers()
            while not stop.is_set():
                self.wfile.write(b"#")
                self.wfile.flush()
                time.sleep(TRICKLE_SECONDS)

        def log_message(self, *args: object) -> None:
            pass

    address = (os.environ.get("POD_IP", ""), int(os.environ["SLUICE_METRICS_PORT"]))
    server = ThreadingHTTPServer(address, Metrics)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


signal.signal(signal.SIGTERM, lambda *_: stop.set())
if options.get("metrics"):
    serve_metrics(options["metrics"], options.get("hits"))
print(json.dumps({"event": "started", "epoch": epoch, "image": config.get("image")}), flush=True)
if "exitCode" in options:
    stop.wait(float(options.get("afterSeconds", 1)))
    code = int(options["exitCode"])
    leave(code, "StandIn", str(options.get("message", f"stand-in exit {code}")))
stop.wait()
leave(0, "Stopped", "clean stop after SIGTERM")
