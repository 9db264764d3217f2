"""Command line of the driver: where its configuration comes from and its exit codes.

Exit codes (the operator reads them): 0 clean stop, 1 failure (batch failed or a
dependency is down), 2 invalid configuration (the message names the field),
3 fenced by a driver with a newer epoch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

EPILOG = """\
configuration: the pipeline spec as JSON, from --config FILE or the SLUICE_CONFIG
environment variable (the operator sets it), with SLUICE_PIPELINE, SLUICE_NAMESPACE
and SLUICE_EPOCH naming the pipeline and this driver's epoch.

exit codes: 0 clean stop, 1 failure, 2 invalid configuration, 3 fenced by a newer epoch.
"""


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m sluice_job",
        description="Run the fenced micro-batch loop of one StreamingPipeline.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("--config", metavar="FILE", help="pipeline spec as JSON")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser().parse_args(argv)
    print("sluice_job: the driver loop is not part of this build yet", file=sys.stderr)
    return 1
