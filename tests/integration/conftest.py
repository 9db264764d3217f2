"""The integration suite runs against the local stack: its fixtures come from
``tests/support/fixtures.py``."""

from tests.support.fixtures import *  # noqa: F403
