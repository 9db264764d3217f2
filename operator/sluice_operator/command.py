"""``sluice``: the on-call engineer's command (also ``kubectl sluice``, by its name).

``sluice offsets reset NAME --to-datetime T --reason R`` replays from a time (or from
earliest, explicit offsets, or skips to latest) by setting ``spec.offsetReset`` with a
new id and the caller's name: the operator stops the driver cleanly, the next driver
moves the positions under its new epoch (which fences anything still running) and
records the reset in the batch history, and the pipeline resumes; ``--wait`` returns
once ``status.offsetReset`` names the id. ``sluice offsets show NAME`` prints where
the pipeline stands and the last reset. It talks to the Kubernetes API only (the
kubeconfig's context, or the pod's service account), as kubectl does.

Building the request and the report is pure (:func:`reset_request`, :func:`report`);
:func:`main` is the I/O around them.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from sluice_api import names
from sluice_api.offset_reset import OffsetReset

DESCRIPTION = "Replay or skip a StreamingPipeline's Kafka offsets, and show where it stands."


def parser() -> argparse.ArgumentParser:
    result = argparse.ArgumentParser(prog="sluice", description=DESCRIPTION)
    result.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    commands = result.add_subparsers(dest="group", required=True)
    offsets = commands.add_parser("offsets", help="committed positions: show, reset")
    verbs = offsets.add_subparsers(dest="verb", required=True)
    show = verbs.add_parser("show", help="where the pipeline stands and its last reset")
    show.add_argument("name")
    show.add_argument("-o", "--output", choices=("text", "json"), default="text")
    reset = verbs.add_parser("reset", help="replay or skip, once, under a new epoch")
    reset.add_argument("name")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="replay all Kafka retains")
    to.add_argument("--to-latest", action="store_true", help="skip to the last stable offsets")
    to.add_argument("--to-datetime", metavar="TIME", help="RFC 3339, e.g. 2026-11-24T10:00:00Z")
    to.add_argument(
        "--to-offset",
        metavar="TOPIC:PARTITION=OFFSET",
        action="append",
        help="a partition's next offset to read (repeat; the others keep theirs)",
    )
    reset.add_argument("--reason", required=True, help="why (kept in the batch history)")
    reset.add_argument("--id", help="the reset's id (default: reset-<UTC time>)")
    reset.add_argument("--wait", action="store_true", help="until the reset is in effect")
    reset.add_argument("--timeout", type=float, default=600.0, help="seconds --wait waits")
    return result


def reset_request(args: argparse.Namespace, who: str, now: datetime) -> OffsetReset:
    """``spec.offsetReset`` for the command line ``args``; raises ``ValueError`` naming
    the option that is wrong."""
    fields: dict[str, Any] = {
        "id": args.id or f"reset-{now.astimezone(UTC):%Y%m%dt%H%M%Sz}",
        "reason": args.reason,
        "requestedBy": who,
    }
    if args.to_earliest:
        fields["to"] = "Earliest"
    elif args.to_latest:
        fields["to"] = "Latest"
    elif args.to_datetime:
        fields.update(to="Timestamp", timestamp=args.to_datetime)
    else:
        fields.update(to="Offsets", offsets=[_partition_offset(item) for item in args.to_offset])
    try:
        return OffsetReset.model_validate(fields)
    except ValidationError as err:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
        raise ValueError(problems) from None


def _partition_offset(text: str) -> dict[str, Any]:
    where, _, offset = text.rpartition("=")
    topic, _, partition = where.rpartition(":")
    if not topic or not partition.isdigit() or not offset.isdigit():
        raise ValueError(f"--to-offset {text!r}: expected TOPIC:PARTITION=OFFSET, e.g. events:0=42")
    return {"topic": topic, "partition": int(partition), "offset": int(offset)}


def report(pipeline: Mapping[str, Any]) -> str:
    """``offsets show``: phase, epoch, last commit, lag, and the reset asked and in effect."""
    meta, spec = pipeline.get("metadata", {}), pipeline.get("spec", {})
    status = pipeline.get("status") or {}
    lines = [
        f"pipeline:    {meta.get('namespace')}/{meta.get('name')}",
        f"phase:       {status.get('phase', 'Pending')} (epoch {status.get('epoch', 0)})",
        f"topics:      {', '.join(spec.get('source', {}).get('kafka', {}).get('topics', []))}",
    ]
    commit = status.get("lastCommit")
    lines.append(
        f"last commit: batch {commit['batchId']} at {commit['time']}"
        if commit
        else "last commit: -"
    )
    lag = status.get("lag")
    lines.append(
        f"lag:         {lag['records']} records at {lag['time']}" if lag else "lag:         -"
    )
    asked, done = spec.get("offsetReset"), status.get("offsetReset")
    if asked:
        target = asked.get("timestamp") or _offsets_text(asked.get("offsets")) or ""
        state = (
            f"in effect since epoch {done['epoch']} ({done['time']})"
            if done and done.get("id") == asked["id"]
            else "pending"
        )
        lines.append(
            f"reset:       {asked['id']} to {asked['to']} {target}".rstrip() + f": {state}"
        )
        if asked.get("requestedBy") or asked.get("reason"):
            lines.append(
                f"             by {asked.get('requestedBy') or '?'}: {asked.get('reason')}"
            )
    else:
        lines.append("reset:       -")
    lines.append(
        "positions:   per partition in the checkpoint's batch history "
        "(SELECT * FROM <keyspace>.batches WHERE pipeline = '<namespace>/<name>')"
    )
    return "\n".join(lines)


def _offsets_text(items: Sequence[Mapping[str, Any]] | None) -> str:
    return ", ".join(f"{i['topic']}:{i['partition']}={i['offset']}" for i in items or [])


def in_effect(pipeline: Mapping[str, Any], reset_id: str) -> bool:
    done = (pipeline.get("status") or {}).get("offsetReset") or {}
    return bool(done.get("id") == reset_id)


# -- I/O ---------------------------------------------------------------------------


def _clients(namespace: str | None) -> tuple[Any, str, str]:
    """The custom-objects API, the namespace and the caller's name."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
        who = "serviceaccount"
        found = namespace or _incluster_namespace()
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
        _, active = config.list_kube_config_contexts()  # type: ignore[no-untyped-call]
        context = (active or {}).get("context", {})
        who = str(context.get("user") or getpass.getuser())
        found = namespace or str(context.get("namespace") or "default")
    return client.CustomObjectsApi(), found, who


def _incluster_namespace() -> str:
    with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as handle:
        return handle.read().strip()


def _get(api: Any, namespace: str, name: str) -> dict[str, Any]:
    found = api.get_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, name
    )
    return dict(found)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from kubernetes.client.exceptions import ApiException

    api, namespace, who = _clients(args.namespace)
    try:
        if args.verb == "show":
            pipeline = _get(api, namespace, args.name)
            print(
                json.dumps(pipeline.get("status") or {})
                if args.output == "json"
                else report(pipeline)
            )
            return 0
        try:
            request = reset_request(args, who, datetime.now(UTC))
        except ValueError as err:
            print(f"sluice: {err}", file=sys.stderr)
            return 2
        patch = {
            "spec": {
                "offsetReset": request.model_dump(mode="json", by_alias=True, exclude_none=True)
            }
        }
        asked_at = datetime.now(UTC)
        patched = api.patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            namespace,
            names.PLURAL,
            args.name,
            patch,
            _content_type="application/merge-patch+json",
        )
        print(
            f"offset reset {request.id} asked: the driver stops cleanly and the next one applies it"
        )
        if not args.wait:
            return 0
        generation = int(patched["metadata"]["generation"])
        return _wait(api, (namespace, args.name), request.id, (generation, asked_at), args.timeout)
    except ApiException as err:
        print(
            f"sluice: {namespace}/{args.name}: {err.status} {err.reason}: {_message(err)}",
            file=sys.stderr,
        )
        return 1


def gave_up(pipeline: Mapping[str, Any], generation: int, asked_at: datetime) -> str | None:
    """Why the reset will not take effect, once the operator has seen it: the pipeline
    Failed, or the spec asking for it was rolled back (its driver failed)."""
    status = pipeline.get("status") or {}
    if int(status.get("observedGeneration") or 0) < generation:
        return None
    rolled = status.get("rolledBack")
    if rolled and datetime.fromisoformat(rolled["time"]) >= asked_at:
        return f"rolled back to the last good spec: {rolled['reason']}"
    if status.get("phase") == "Failed":
        return f"pipeline Failed: {status.get('message', '')}"
    return None


def _wait(
    api: Any, where: tuple[str, str], reset_id: str, asked: tuple[int, datetime], timeout: float
) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pipeline = _get(api, *where)
        if in_effect(pipeline, reset_id):
            print(report(pipeline))
            return 0
        why = gave_up(pipeline, *asked)
        if why is not None:
            print(f"sluice: offset reset {reset_id} not applied: {why}", file=sys.stderr)
            return 1
        time.sleep(1.0)
    print(f"sluice: offset reset {reset_id} not in effect after {timeout:.0f}s", file=sys.stderr)
    return 1


def _message(err: Any) -> str:
    try:
        return str(json.loads(err.body).get("message", ""))
    except (TypeError, ValueError):
        return ""
