"""Example transforms for the seed scenario: UI interaction events from Kafka."""
