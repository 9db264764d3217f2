"""The resource's API identity and the labels and annotations on the objects the
operator creates, which the driver, the chart's monitors and the tests select by.
"""

from typing import Final

GROUP: Final = "sluice.dev"
VERSION: Final = "v1alpha1"
PLURAL: Final = "streamingpipelines"
KIND: Final = "StreamingPipeline"

LABEL_PIPELINE: Final = "sluice.dev/pipeline"
LABEL_ROLE: Final = "sluice.dev/role"
LABEL_EPOCH: Final = "sluice.dev/epoch"
ANNOTATION_EPOCH: Final = "sluice.dev/epoch"
ANNOTATION_SPEC_HASH: Final = "sluice.dev/spec-hash"
ROLE_DRIVER: Final = "driver"
ROLE_EXECUTOR: Final = "executor"
MANAGED_BY: Final = "sluice-operator"
