"""The user's code a pipeline runs: ``spec.transform``, its entrypoint and the
options it receives (free-form, or from Secrets), with the bounds on their size.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, Self

from pydantic import Field, field_validator, model_validator

from sluice_api.event_time import EventTime
from sluice_api.spec_base import ENTRYPOINT as ENTRYPOINT_PATTERN
from sluice_api.spec_base import Model, SecretName
from sluice_api.state import STATES_MAX, State, states_once

ENTRYPOINT = re.compile(ENTRYPOINT_PATTERN)
OPTIONS_MAX: Final = 64
OPTIONS_MAX_BYTES: Final = 64 * 1024
OPTION_NAME: Final = r"^[A-Za-z_][A-Za-z0-9_.-]{0,62}$"


class SecretOption(Model):
    """A transform option whose value is the key of a Secret."""

    option: str = Field(
        pattern=OPTION_NAME,
        max_length=63,
        description="Name of the option, as the transform receives it.",
    )
    secret: SecretName
    key: str = Field(
        pattern=r"^[-._a-zA-Z0-9]{1,253}$",
        max_length=253,
        description="Key of the value in the Secret.",
    )


class Transform(Model):
    """User code: ``module:function(df, options) -> DataFrame | TransformResult``."""

    entrypoint: str = Field(
        pattern=ENTRYPOINT.pattern,
        max_length=512,
        description=(
            "Python 'module:function' taking (DataFrame, options) and returning the rows "
            "for the sink, or a TransformResult(output, rejects) whose rejects go to "
            "deadLetter."
        ),
    )
    options: dict[str, Any] = Field(
        default_factory=dict,
        max_length=OPTIONS_MAX,
        description=(
            f"Free-form options passed to the function: at most {OPTIONS_MAX}, "
            f"{OPTIONS_MAX_BYTES // 1024} KiB as JSON."
        ),
    )
    options_from: list[SecretOption] = Field(
        default_factory=list,
        max_length=32,
        description=(
            "Options whose values come from Secrets (passwords, tokens): the driver pod gets "
            "them as secret references, so the values are in neither the manifest nor the "
            "driver's configuration, and the function receives them in options with the "
            "others, as strings."
        ),
    )

    state: list[State] = Field(
        default_factory=list,
        max_length=STATES_MAX,
        description=(
            "Keyed state the function reads and writes between batches, each a Cassandra "
            "table in the checkpoint's cluster, written under the checkpoint's fence "
            "(docs/stateful.md). With state the function takes (DataFrame, options, state)."
        ),
    )

    event_time: EventTime | None = Field(
        default=None,
        description=(
            "The pipeline's event time (docs/stateful.md): a watermark kept in the "
            "checkpoint row, and records behind it dead-lettered or counted. With it the "
            "function takes (DataFrame, options, state)."
        ),
    )

    @field_validator("state")
    @classmethod
    def each_state_once(cls, value: list[State]) -> list[State]:
        return states_once(value)

    @model_validator(mode="after")
    def windows_need_event_time(self) -> Self:
        windowed = [s.name for s in self.state if s.window is not None or s.session is not None]
        if windowed and self.event_time is None:
            raise ValueError(
                f"transform.state {windowed} declare a window or session: they close by the "
                "event-time watermark, so set transform.eventTime"
            )
        return self

    @model_validator(mode="after")
    def each_option_once(self) -> Self:
        names = [source.option for source in self.options_from]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"each option of transform.optionsFrom is named once: {twice}")
        both = sorted(set(names) & set(self.options))
        if both:
            raise ValueError(
                "an option is set either in transform.options or in transform.optionsFrom, "
                f"not both: {both}"
            )
        return self

    @field_validator("options")
    @classmethod
    def options_fit(cls, value: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(value, separators=(",", ":")).encode())
        if size > OPTIONS_MAX_BYTES:
            raise ValueError(
                f"transform.options is {size} bytes as JSON, more than {OPTIONS_MAX_BYTES}: "
                "keep large data in a ConfigMap or file the transform reads"
            )
        return value
