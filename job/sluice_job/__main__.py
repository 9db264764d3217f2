"""``python -m sluice_job``: the driver process of one StreamingPipeline."""

import sys

from sluice_job.cli import main

sys.exit(main())
