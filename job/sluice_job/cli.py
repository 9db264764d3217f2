"""Command line of the driver: configuration in, exit code out.

Exit codes (the operator reads them): 0 clean stop, 1 failure (batch failed or a
dependency is down), 2 invalid configuration (the message names the field),
3 fenced by a driver with a newer epoch. Whatever the outcome, a JSON termination
message says why and where the driver left off.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from sluice_api import env, termination
from sluice_api.exitcodes import ExitCode
from sluice_job import checkpoint_schema, executor_backend, logs, offsets, spark_env, stopping
from sluice_job import config as driver_config
from sluice_job.runner import Progress

KEYSPACE = re.compile(r"^[A-Za-z0-9_]{1,48}$")
EPILOG = """\
configuration: the pipeline spec as JSON, from --config FILE or the SLUICE_CONFIG
environment variable (the operator sets it), with SLUICE_PIPELINE, SLUICE_NAMESPACE
SLUICE_CLUSTER_ID and SLUICE_EPOCH naming the pipeline, its cluster and this driver's
epoch.

`--checkpoint-schema KEYSPACE` prints the CQL that makes the checkpoint tables, for an
administrator who creates them before granting a pipeline's role SELECT and MODIFY.

exit codes: 0 clean stop, 1 failure, 2 invalid configuration, 3 fenced by a newer epoch.

`--migrate-state NAME` rewrites the rows of state NAME that older revisions wrote in
the revision the spec declares, through its migrate function (docs/stateful.md), then
exits: 0 done (a JSON summary on stdout), 1 a dependency failed, 2 invalid.

`python -m sluice_job executor` is the image's other role: a Spark executor in a pod
that the driver's Spark started (it sets the SPARK_* variables the role reads).
"""


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(
        prog="python -m sluice_job",
        description="Run the fenced micro-batch loop of one StreamingPipeline.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    result.add_argument("--config", metavar="FILE", type=Path, help="pipeline spec as JSON")
    result.add_argument(
        "--checkpoint-schema",
        metavar="KEYSPACE",
        help="print the CQL of the checkpoint tables in KEYSPACE and exit",
    )
    result.add_argument(
        "--migrate-state",
        metavar="NAME",
        help="rewrite state NAME's rows of older revisions through its migrate function, exit",
    )
    result.add_argument(
        "role",
        nargs="?",
        choices=[executor_backend.ROLE],
        help="run as a Spark executor (Spark's executor pods pass it); default: the driver",
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.checkpoint_schema:
        if not KEYSPACE.match(args.checkpoint_schema):
            print(
                f"sluice_job: --checkpoint-schema {args.checkpoint_schema!r} is not a "
                "Cassandra keyspace name (letters, digits, _; at most 48)",
                file=sys.stderr,
            )
            return int(ExitCode.INVALID_CONFIG)
        for statement in checkpoint_schema.statements(args.checkpoint_schema):
            print(f"{statement};")
        return 0
    if args.role == executor_backend.ROLE:
        try:
            executor_backend.run(os.environ)
        except executor_backend.ExecutorEnvError as err:
            print(f"sluice_job: {err}", file=sys.stderr)
            return int(ExitCode.INVALID_CONFIG)
    logs.setup()
    spark_env.drop_ignored(os.environ)
    try:
        cfg = driver_config.load(os.environ, args.config)
    except driver_config.ConfigError as err:
        logs.event("invalid configuration", level=40, message=str(err))
        print(f"sluice_job: {err}", file=sys.stderr)
        path = Path(os.environ.get(env.TERMINATION_LOG, env.DEFAULT_TERMINATION_LOG))
        termination.write(
            path, termination.Termination(ExitCode.INVALID_CONFIG, "InvalidConfig", str(err))
        )
        return int(ExitCode.INVALID_CONFIG)

    if args.migrate_state:
        return _migrate(cfg, args.migrate_state)

    stop = threading.Event()
    progress = Progress()
    # Before Spark and the clients load (seconds): a SIGTERM then is a clean stop too.
    _on_sigterm(stop, cfg.spec.upgrade.stop_timeout_seconds, cfg.termination_log, progress)
    from sluice_job import driver  # Spark and the clients load only for a real run

    outcome = driver.run(cfg, stop, progress)
    _finished.set()
    termination.write(cfg.termination_log, outcome)
    return int(outcome.exit_code)


def _migrate(cfg: driver_config.DriverConfig, name: str) -> int:
    """``--migrate-state``: one state's table migrated eagerly (``state.migrate``)."""
    from sluice_job.state import migrate  # Spark's types and the client load only for this

    try:
        done = migrate.command(cfg, name, os.environ)
    except (migrate.StateSchemaError, migrate.StateRevisionError) as err:
        logs.event("state not migrated", level=40, state=name, message=str(err))
        print(f"sluice_job: {err}", file=sys.stderr)
        return int(ExitCode.INVALID_CONFIG)
    except Exception as err:  # a dependency: the checkpoint's cluster
        logs.event("state not migrated", level=40, state=name, message=str(err))
        print(f"sluice_job: migrating state {name!r} failed: {err}", file=sys.stderr)
        return int(ExitCode.FAILURE)
    logs.event(
        "state migrated",
        state=name,
        rows=done.rows,
        rewritten=done.rewritten,
        deleted=done.deleted,
        why="--migrate-state: rows of older revisions rewritten in this revision's meaning",
    )
    print(json.dumps(dataclasses.asdict(done)))
    return 0


def _on_sigterm(stop: threading.Event, timeout: float, path: Path, progress: Progress) -> None:
    """SIGTERM asks for a clean stop: the batch in flight finishes and commits; with
    none in flight, the driver stops at once and begins none (``stopping``). If it has
    not stopped within the stop timeout, it leaves with code 1 (nothing committed)."""

    def watchdog(finishing: int | None) -> None:
        if not _finished.wait(timeout):
            message = stopping.timeout_message(finishing, timeout)
            logs.event("stop timeout", level=40, message=message)
            termination.write(
                path,
                termination.Termination(
                    ExitCode.FAILURE,
                    "StopTimeout",
                    message,
                    progress.batch_id,
                    offsets=offsets.to_json(progress.positions),
                ),
            )
            os._exit(int(ExitCode.FAILURE))

    def handler(_signum: int, _frame: FrameType | None) -> None:
        if not stop.is_set():
            finishing = progress.gate.close()
            logs.event(stopping.announcement(finishing), batch_id=finishing)
            stop.set()
            threading.Thread(target=watchdog, args=(finishing,), daemon=True).start()

    signal.signal(signal.SIGTERM, handler)


_finished = threading.Event()
