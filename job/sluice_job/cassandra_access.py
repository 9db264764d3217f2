"""A Cassandra permission refusal, said in the pipeline's terms.

With ``CassandraAuthorizer`` a role that lacks a permission gets ``Unauthorized``
with a server message such as ``User team_a has no MODIFY permission on <table
team_b.checkpoints> or any of its parents``. That is a configuration error (exit 2:
the spec names a keyspace its role may not use, or the role lacks a grant), never an
outage to wait out or a batch to retry. A purely computational module: :func:`describe`
turns the server's message into one naming the spec field, the keyspace, the role
and the missing permission, with the grant that would allow it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

_REFUSAL: Final = re.compile(
    r"User (?P<role>\S+) has no (?P<permission>[A-Z_]+) permission on "
    r"<(?P<kind>\w+) (?P<resource>[^>]+)>"
)


class AccessDeniedError(Exception):
    """A Cassandra role may not do what the driver needs (exit 2)."""


@dataclass(frozen=True)
class Refusal:
    role: str
    permission: str
    kind: str
    """``table`` or ``keyspace`` (``all keyspaces`` and others pass through)."""
    resource: str
    """``keyspace.table`` or ``keyspace``."""

    @property
    def keyspace(self) -> str:
        return self.resource.split(".", 1)[0]


def parse(message: str) -> Refusal | None:
    """The refusal in a server message; ``None`` if the message is not one."""
    found = _REFUSAL.search(message)
    if found is None:
        return None
    return Refusal(found["role"], found["permission"], found["kind"], found["resource"])


def describe(message: str, fields: dict[str, str]) -> str:
    """The refusal in ``message`` as a user reads it; ``fields`` maps a keyspace the
    spec names to its field (``checkpoint.cassandra.keyspace`` ...)."""
    refusal = parse(message)
    if refusal is None:
        return f"Cassandra refused the request: {message}"
    field = fields.get(refusal.keyspace, "the Cassandra credentials")
    return (
        f"{field}: Cassandra role {refusal.role!r} has no {refusal.permission} permission "
        f"on {refusal.kind} {refusal.resource} (keyspace {refusal.keyspace!r}); name the "
        f"keyspace this role is for, or grant it: GRANT {refusal.permission} ON "
        f"{refusal.kind.upper()} {refusal.resource} TO {refusal.role} "
        "(docs/checkpoint-store.md lists what a pipeline's role needs)"
    )
