"""Flipping the Pub/Sub server's fault switches from another process (tests, the
demo, ``sluice-dev``).

Plain HTTP to the control port of ``stack/go/pubsub`` (its ``control.go`` lists the
routes), standard library only, so importing it costs nothing. Everything is per
project: a test in a project of its own sees only its own switches and counters.

The switches (all off by default):

``drop_acks``
    Acknowledge answers OK and acknowledges nothing: the messages come back once
    their leases expire.
``drop_modacks``
    Lease extensions (modifyAckDeadline above 0) answer OK and extend nothing, so
    leases expire at their current deadline; nacks still take effect.
``unavailable``
    Every RPC of the project fails with UNAVAILABLE and open streaming pulls end.
``fail``
    ``{method: code}``: every call of that method fails with that gRPC code, for
    example ``{"Acknowledge": "INTERNAL"}``.

and one action, :func:`redeliver`: every lease of a delivered, unacknowledged
message expires now, so the server delivers those messages again.
"""

from __future__ import annotations

from typing import Any

from sluice_dev import controlhttp, ports
from sluice_dev.controlhttp import quote as _quote


def set_faults(
    project: str,
    *,
    drop_acks: bool | None = None,
    drop_modacks: bool | None = None,
    unavailable: bool | None = None,
    fail: dict[str, str] | None = None,
    port: int = ports.PUBSUB_CONTROL,
) -> dict[str, Any]:
    """Change the switches given (the others stay as they are); returns the stats."""
    body = fault_patch(
        drop_acks=drop_acks, drop_modacks=drop_modacks, unavailable=unavailable, fail=fail
    )
    result: dict[str, Any] = _call(port, "POST", f"/projects/{_quote(project)}/faults", body)
    return result


def fault_patch(
    *,
    drop_acks: bool | None = None,
    drop_modacks: bool | None = None,
    unavailable: bool | None = None,
    fail: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The body of a switch change: only the switches given (a purely computational
    function; the server rejects unknown fields, methods and codes by name)."""
    given = {
        "drop_acks": drop_acks,
        "drop_modacks": drop_modacks,
        "unavailable": unavailable,
        "fail": fail,
    }
    return {name: value for name, value in given.items() if value is not None}


def redeliver(
    project: str, subscription: str | None = None, *, port: int = ports.PUBSUB_CONTROL
) -> int:
    """Expire every lease of the project's delivered, unacknowledged messages now (of
    one subscription, by its short name, if given); returns how many expired."""
    query = f"?subscription={_quote(subscription)}" if subscription else ""
    result = _call(port, "POST", f"/projects/{_quote(project)}/redeliver{query}", {})
    return int(result["expired"])


def stats(project: str, *, port: int = ports.PUBSUB_CONTROL) -> dict[str, Any]:
    """``{"faults": {...}, "subscriptions": {short name: counters}, "refused":
    {"Method:Code": n}}``; the counters per subscription are ``delivered``,
    ``redelivered``, ``acked``, ``acks_stale`` (an older delivery's ack ID),
    ``acks_dropped``, ``modacks``, ``modacks_dropped``, ``nacks``, ``expired`` (by
    :func:`redeliver`) and ``unacked`` (delivered, not yet acknowledged)."""
    result: dict[str, Any] = _call(port, "GET", f"/projects/{_quote(project)}/stats")
    return result


def subscription_stats(
    project: str, subscription: str, *, port: int = ports.PUBSUB_CONTROL
) -> dict[str, int]:
    """The counters of one subscription (all zero before its first delivery)."""
    found: dict[str, int] = stats(project, port=port)["subscriptions"].get(subscription, {})
    return {**dict.fromkeys(COUNTERS, 0), **found}


COUNTERS = (
    "delivered",
    "redelivered",
    "acked",
    "acks_stale",
    "acks_dropped",
    "modacks",
    "modacks_dropped",
    "nacks",
    "expired",
    "unacked",
)


def reset(project: str, *, port: int = ports.PUBSUB_CONTROL) -> None:
    """Every switch of the project off and its counters zero (its messages stay)."""
    _call(port, "POST", f"/projects/{_quote(project)}/reset", {})


def forget(project: str, *, port: int = ports.PUBSUB_CONTROL) -> None:
    """Reset the project and delete its subscriptions and topics."""
    _call(port, "DELETE", f"/projects/{_quote(project)}")


def healthy(port: int = ports.PUBSUB_CONTROL) -> str | None:
    """``None`` if the control server answers ``/healthz``, else why not."""
    return controlhttp.healthy("pubsub", port)


def _call(port: int, method: str, path: str, body: object = None) -> Any:
    return controlhttp.call("pubsub", port, method, path, body)
