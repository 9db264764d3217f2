"""``python -m sluice_dev`` is ``sluice-dev``."""

import sys

from sluice_dev.cli import main

sys.exit(main())
