"""Fields of a spec this operator does not know: set aside, not fatal.

Why it exists: the API server keeps a field only if the CRD declares it, so a field the
operator's spec model does not know means the CRD is newer than the operator (applied
first in a rollout, or the operator rolled back). The model refuses unknown fields (a
typo in the driver's configuration must fail), and the operator took such a spec for
an invalid one and stopped its running driver: every pipeline stopped for the length
of a rollout. The operator instead acts on the fields it knows and says which it
ignored (``decide`` sets condition ``SpecUnderstood``). The drivers it builds get its
own view of the spec, which their image understands.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

UNKNOWN: Final = "extra_forbidden"
"""pydantic's error type for a field the model does not declare."""


def set_aside(
    raw: Mapping[str, Any], err: ValidationError
) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """``raw`` without the fields ``err`` calls unknown, and their dotted paths
    (``spec.a.b``); ``None`` when ``err`` has any other problem (the spec is invalid)."""
    problems = err.errors()
    if not problems or any(p["type"] != UNKNOWN for p in problems):
        return None
    known: dict[str, Any] = copy.deepcopy(dict(raw))
    paths = []
    for problem in problems:
        *parents, name = problem["loc"]
        node: Any = known
        for part in parents:
            node = node[part]
        del node[name]
        paths.append(".".join(["spec", *(str(part) for part in problem["loc"])]))
    return known, tuple(sorted(paths))
