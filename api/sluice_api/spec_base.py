"""The base of every spec model and the field types and bounds the spec's modules share.

Its own module so that the spec's parts (``spec``, ``pod``, ``source``, ``sink``,
``checkpoint`` and the others) can import it without importing each other.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

K8S_NAME: Final = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A Kubernetes object name (DNS subdomain)."""
CASSANDRA_NAME: Final = r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$"
HOST_PORT = r"^[^\s:,]+(:[0-9]{1,5})?$"
CONTACT_POINTS_MAX: Final = 32
CASSANDRA_MAX_TTL: Final = 630_720_000
ENTRYPOINT: Final = r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
"""``module:function``, as ``transform.entrypoint`` and a state's ``migrate`` name code."""
"""Cassandra refuses a TTL above 20 years: every write with a larger one fails."""

SecretName = Annotated[
    str, Field(pattern=K8S_NAME, max_length=253, description="Name of a Secret in the namespace.")
]
HostPort = Annotated[str, Field(pattern=HOST_PORT, max_length=261, description="host or host:port")]


class Model(BaseModel):
    """Base: camelCase aliases, unknown fields rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
