"""Idempotent sinks: each writes a batch's rows keyed deterministically, ordered by
the batch's write version (see ``write_order``)."""


class SinkSchemaError(Exception):
    """The transform's output does not fit the sink (a missing table, key column or
    an unsupported type); the message names what is missing."""
