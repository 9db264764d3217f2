"""The Sluice operator: reconciles each StreamingPipeline into exactly one driver pod."""
