"""``python -m sluice_operator``: run the operator."""

import sys

from sluice_operator.cli import main

sys.exit(main())
