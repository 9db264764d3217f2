"""The servers of the local stack, each described by a :class:`Server`."""
