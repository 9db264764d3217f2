"""CQL statements that carry names and passwords chosen by tests, quoted so that any
character is taken literally: identifiers in double quotes (a ``"`` doubled),
strings in single quotes (a ``'`` doubled; a backslash is an ordinary character in
CQL). Purely computational; the caller executes the statements.
"""

from __future__ import annotations

from typing import Final

PERMISSIONS: Final = frozenset(
    {"ALL", "ALTER", "AUTHORIZE", "CREATE", "DESCRIBE", "DROP", "EXECUTE", "MODIFY", "SELECT"}
)


def identifier(name: str) -> str:
    """``name`` as a quoted identifier, so case and every character are kept."""
    return '"' + name.replace('"', '""') + '"'


def string(value: str) -> str:
    """``value`` as a CQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def create_login_role(name: str, password: str) -> str:
    return f"CREATE ROLE {identifier(name)} WITH PASSWORD = {string(password)} AND LOGIN = true"


def grant_on_keyspace(permission: str, keyspace: str, role: str) -> str:
    """``GRANT permission ON KEYSPACE keyspace TO role``; the permission must be one
    of ``PERMISSIONS``, and the keyspace's name is taken exactly as given (quoted:
    an unquoted ``CREATE KEYSPACE Name`` made ``name``)."""
    if permission not in PERMISSIONS:
        raise ValueError(f"permission {permission!r} is not one of {sorted(PERMISSIONS)}")
    return f"GRANT {permission} ON KEYSPACE {identifier(keyspace)} TO {identifier(role)}"
