"""Validation errors of the spec model as one line a user can act on.

The driver puts it in its termination message (exit 2), the operator in the
pipeline's ``Ready`` condition; both name fields as the manifest does.
"""

from __future__ import annotations

from pydantic import ValidationError


def describe(err: ValidationError) -> str:
    """One line per problem, each starting with the dotted camelCase field path."""
    lines = []
    for problem in err.errors():
        field = ".".join(["spec", *(str(part) for part in problem["loc"])])
        lines.append(f"{field}: {problem['msg']}")
    return "invalid configuration: " + "; ".join(lines)
