"""``python -m sluice_dev.nodeagent``: run the node agent until SIGTERM.

On SIGTERM or SIGINT every pod process gets SIGTERM, then SIGKILL after
``--shutdown-grace`` seconds, and the agent exits; the pod objects are left as they
are, as when a kubelet stops.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from kubernetes import config
from kubernetes.client import ApiClient

from sluice_dev import ports
from sluice_dev.nodeagent import control, images, node, podspec
from sluice_dev.nodeagent.agent import Agent, NodeAgent
from sluice_dev.nodeagent.settings import Settings, base_env

log = logging.getLogger("sluice_dev.nodeagent")


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sluice_dev.nodeagent", description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="identity of every node")
    parser.add_argument(
        "--node-kubeconfig",
        action="append",
        default=[],
        metavar="NODE=PATH",
        help="a node's own identity (e.g. system:node:<name>), overriding --kubeconfig",
    )
    parser.add_argument("--nodes", required=True, help="comma-separated node names")
    parser.add_argument("--control-port", type=int, default=ports.NODE_AGENT)
    parser.add_argument("--state-dir", type=Path, required=True, help="pod logs and files")
    parser.add_argument("--images", type=Path, help="JSON image -> code root, re-read per start")
    parser.add_argument("--image-root", action="append", default=[], metavar="IMAGE=DIR")
    parser.add_argument("--taint", action="append", default=[], metavar="KEY[=VALUE]:EFFECT")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--pass-env", action="append", default=[], metavar="NAME")
    parser.add_argument(
        "--default-entrypoint",
        type=exec_form,
        default=(),
        metavar="JSON",
        help='ENTRYPOINT of images without an image.entrypoint file, e.g. \'["python", "-m", '
        '"sluice_job"]\' (default: none, such containers need a command)',
    )
    parser.add_argument("--heartbeat-seconds", type=float, default=2.0)
    parser.add_argument("--shutdown-grace", type=float, default=5.0)
    return parser.parse_args(argv)


def settings(args: argparse.Namespace) -> Settings:
    return Settings(
        state_dir=args.state_dir.resolve(),
        images=images.ImageMap(
            static=dict(images.parse_flag(f) for f in args.image_root), file=args.images
        ),
        base_env=base_env(os.environ, args.pass_env),
        default_entrypoint=args.default_entrypoint,
        taints=tuple(node.taint(t) for t in args.taint),
        labels=dict(_pair(label) for label in args.label),
        heartbeat_seconds=args.heartbeat_seconds,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(threadName)s %(message)s"
    )
    conf = settings(args)
    own = dict(_pair(item) for item in args.node_kubeconfig)
    names = [n.strip() for n in args.nodes.split(",") if n.strip()]
    agent = Agent(
        NodeAgent(name, api_client(own.get(name, args.kubeconfig)), conf) for name in names
    )
    stopping = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = control.serve(agent, args.control_port)
    agent.start()
    log.info("node agent up: nodes %s, control port %d", names, args.control_port)
    stopping.wait()
    log.info("stopping: terminating pod processes")
    server.shutdown()
    agent.shutdown(args.shutdown_grace)
    log.info("stopped")
    return 0


def api_client(kubeconfig: str | Path) -> ApiClient:
    client: ApiClient = config.new_client_from_config(str(kubeconfig))  # type: ignore[no-untyped-call]
    return client


def exec_form(text: str) -> tuple[str, ...]:
    """``--default-entrypoint``: a JSON array of strings, as a Dockerfile's exec form."""
    try:
        return podspec.parse_exec_form(text, "--default-entrypoint")
    except podspec.ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"expected KEY=VALUE, got {text!r}")
    return key, value


if __name__ == "__main__":
    sys.exit(main())
