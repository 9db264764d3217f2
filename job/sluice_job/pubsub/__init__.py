"""The Google Cloud Pub/Sub source: bounded pulls turned into fenced, replayable
batches, acknowledged only after their commit (``docs/pubsub.md``)."""
