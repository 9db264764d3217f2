"""Service-account keys: the Datastore sink's, from ``SLUICE_SINK_DATASTORE_CREDENTIALS``
(the Pub/Sub source reads its own variable the same way).

The operator fills the variable from the Secret named by
``sink.datastore.credentialsSecret`` (key ``credentials.json``). It holds either the
key file's JSON itself (it starts with ``{``) or the path of a mounted key file;
the two cannot be confused, as no path starts with ``{``. Unset, the client falls
back to Application Default Credentials (e.g. GKE workload identity); with
``DATASTORE_EMULATOR_HOST`` set no credentials are used at all.

The key never reaches a log line or an error message: ``repr`` hides it and errors
name the variable, not its content. It travels to the executors inside the task,
as the Cassandra sink's password does, so that they need no Secret of their own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sluice_api import env

ENV: Final = env.SINK_DATASTORE_CREDENTIALS
SCOPES: Final = ("https://www.googleapis.com/auth/datastore",)
REQUIRED: Final = ("client_email", "private_key", "token_uri")


class CredentialsError(ValueError):
    """The credentials are unreadable or not a service-account key; names the source."""


@dataclass(frozen=True)
class ServiceAccount:
    info: str = field(repr=False)
    """The key file's JSON text."""
    email: str

    def __repr__(self) -> str:
        return f"ServiceAccount(email={self.email!r}, key=<hidden>)"

    @classmethod
    def from_env(cls, env: Mapping[str, str], variable: str = ENV) -> ServiceAccount | None:
        """The key in ``variable`` (JSON or a path), ``None`` if it is unset."""
        raw = env.get(variable, "").strip()
        if not raw:
            return None
        source = f"{variable}={raw}" if not raw.startswith("{") else variable
        text = raw if raw.startswith("{") else _read(Path(raw), source)
        return cls(text, _email(_parse(text, source), source))

    def google(self, scopes: tuple[str, ...] = SCOPES) -> Any:
        """The ``google.oauth2`` credentials (built where they are used)."""
        from google.oauth2 import service_account

        return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
            json.loads(self.info), scopes=scopes
        )


def _read(path: Path, source: str) -> str:
    try:
        return path.read_text()
    except OSError as err:
        raise CredentialsError(f"{source}: cannot read the key file ({err.strerror})") from None


def _parse(text: str, source: str) -> dict[str, Any]:
    try:
        info = json.loads(text)
    except json.JSONDecodeError:
        raise CredentialsError(f"{source}: not valid JSON") from None
    if not isinstance(info, dict):
        raise CredentialsError(f"{source}: not a JSON object")
    return info


def _email(info: Mapping[str, Any], source: str) -> str:
    if info.get("type") != "service_account":
        raise CredentialsError(
            f"{source}: not a service-account key (type must be service_account)"
        )
    missing = [name for name in REQUIRED if not info.get(name)]
    if missing:
        raise CredentialsError(f"{source}: the service-account key lacks {missing}")
    return str(info["client_email"])
