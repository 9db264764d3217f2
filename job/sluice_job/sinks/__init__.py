"""Idempotent sinks: each writes a batch's rows keyed deterministically, ordered by
the batch's write version (see ``write_order``)."""
