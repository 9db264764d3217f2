"""Secrets by consent: a pipeline may use a Secret only if the platform labelled it so.

A tenant who may create a StreamingPipeline in a namespace must not gain every
Secret of that namespace through it: a manifest names Secrets for credentials,
options, env, files and image pulls, and the driver would hand their contents to the
user's code or send them to whatever hosts the manifest names. The platform marks
the Secrets pipelines may use with one label (the chart's ``secretConsent.label``,
``sluice.dev/usable=true`` by default); before a driver pod is created the operator
reads the labels (metadata only, never a Secret's data) of every Secret the spec
names, and a Secret without the label, or missing, keeps the pod from being created:
the pipeline gets the ``SecretsUsable`` condition naming the Secret and the label,
and starts by itself once the Secret is labelled. An ``optional`` reference to a
Secret that does not exist is fine: the pod starts without it.

:func:`references` and :func:`refusals` are pure; ``kube.Kube.secret_labels`` reads.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from sluice_api import secret_refs
from sluice_api.spec import PipelineSpec

CONDITION: Final = "SecretsUsable"


@dataclass(frozen=True)
class Label:
    """The label that marks a Secret usable by pipelines."""

    key: str
    value: str

    @classmethod
    def parse(cls, text: str) -> Label | None:
        """``key=value`` (or ``key``, any value); empty: no consent is asked."""
        if not text.strip():
            return None
        key, _, value = text.strip().partition("=")
        if not key:
            raise ValueError(f"secret consent label {text!r}: expected key=value")
        return cls(key, value)

    def on(self, labels: Mapping[str, str]) -> bool:
        return self.key in labels and (not self.value or labels[self.key] == self.value)

    def __str__(self) -> str:
        return f"{self.key}={self.value}" if self.value else self.key


DEFAULT: Final = Label("sluice.dev/usable", "true")
DEFAULT_LABEL: Final = str(DEFAULT)


@dataclass(frozen=True)
class Reference:
    secret: str
    where: str
    """The spec field that names it, as a user writes it."""
    optional: bool = False


def references(spec: PipelineSpec) -> tuple[Reference, ...]:
    """Every Secret the spec names, with the field that names it, in spec order."""
    return tuple(_references(spec))


def _references(spec: PipelineSpec) -> Iterator[Reference]:
    named = dict.fromkeys((use.secret, use.where) for use in secret_refs.uses(spec))
    for secret, where in named:
        yield Reference(secret, where)
    pod = spec.spark.pod
    for i, env in enumerate(pod.env):
        ref = env.value_from.secret_key_ref if env.value_from else None
        if ref is not None:
            yield Reference(ref.name, f"spark.pod.env[{i}].valueFrom", ref.optional)
    for i, source in enumerate(pod.env_from):
        if source.secret_ref is not None:
            yield Reference(
                source.secret_ref.name, f"spark.pod.envFrom[{i}]", source.secret_ref.optional
            )
    for i, volume in enumerate(pod.volumes):
        if volume.secret is not None:
            yield Reference(
                volume.secret.secret_name, f"spark.pod.volumes[{i}].secret", volume.secret.optional
            )
    for i, name in enumerate(pod.image_pull_secrets):
        yield Reference(name, f"spark.pod.imagePullSecrets[{i}]")


def refusals(
    refs: tuple[Reference, ...], labels: Mapping[str, Mapping[str, str] | None], label: Label
) -> tuple[str, ...]:
    """Why each refused Secret may not be used, one line per Secret (a pure function).
    ``labels`` maps each named Secret to its labels, ``None`` if it does not exist."""
    said: dict[str, str] = {}
    for ref in refs:
        if ref.secret in said:
            continue
        found = labels.get(ref.secret)
        if found is None:
            if not ref.optional:
                said[ref.secret] = (
                    f"Secret {ref.secret!r} ({ref.where}) does not exist; create it with "
                    f"the label {label}"
                )
        elif not label.on(found):
            said[ref.secret] = (
                f"Secret {ref.secret!r} ({ref.where}) lacks the label {label}: the platform "
                "has not allowed pipelines to use it"
            )
    return tuple(said.values())
