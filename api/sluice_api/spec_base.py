"""The base of every spec model and the name patterns the spec's modules share.

Its own module so that the spec's parts (``spec``, ``pod``) can import it without
importing each other.
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

K8S_NAME: Final = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
"""A Kubernetes object name (DNS subdomain)."""


class Model(BaseModel):
    """Base: camelCase aliases, unknown fields rejected, immutable."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )
