"""Placeholder: filled in by the tools component."""

from sluice_dev.artifacts import Artifact
from sluice_dev.servers.base import Server

ARTIFACTS: tuple[Artifact, ...] = ()
SERVERS: tuple[Server, ...] = ()
