"""The stack's Pub/Sub server seen from Python: its fault switches
(:mod:`.remote`) and publishing sample events to it (:mod:`.publish`). The server
itself is Go (``stack/go/pubsub``, :mod:`sluice_dev.servers.pubsub`)."""
