"""The driver's exit codes: the contract with the operator (docs/design.md)."""

from enum import IntEnum


class ExitCode(IntEnum):
    CLEAN_STOP = 0
    FAILURE = 1
    INVALID_CONFIG = 2
    FENCED = 3
