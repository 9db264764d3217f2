"""Loading the user's transformation: ``module:function(df, options) -> DataFrame``.

The function receives the batch's records (Kafka's columns plus ``batch_id``) and
the ``transform.options`` mapping, and returns the rows for the sink.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, cast

from pyspark.sql import DataFrame

TransformFn = Callable[[DataFrame, Mapping[str, Any]], DataFrame]


class EntrypointError(ValueError):
    """``transform.entrypoint`` does not name a callable; the message says why."""


def load(entrypoint: str) -> TransformFn:
    module_name, _, function_name = entrypoint.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise EntrypointError(
            f"spec.transform.entrypoint: cannot import module {module_name!r}: {err}"
        ) from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise EntrypointError(
            f"spec.transform.entrypoint: {module_name!r} has no function {function_name!r}"
        )
    return cast(TransformFn, function)
