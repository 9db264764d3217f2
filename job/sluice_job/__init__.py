"""The Sluice driver: a fenced micro-batch loop over planned Kafka offset ranges."""
