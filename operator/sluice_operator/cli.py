"""Command line of the operator: which namespaces it watches and how replicas agree
on the one that acts."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m sluice_operator",
        description="Reconcile StreamingPipelines (sluice.dev/v1alpha1) into driver pods.",
    )
    scope = result.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace", action="append", metavar="NS", help="watch only NS (repeatable)"
    )
    scope.add_argument("--all-namespaces", action="store_true", help="watch the whole cluster")
    result.add_argument("--metrics-port", type=int, default=9090, help="Prometheus port")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser().parse_args(argv)
    print("sluice_operator: reconciliation is not part of this build yet", file=sys.stderr)
    return 1
