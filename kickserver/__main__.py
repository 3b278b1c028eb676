"""`python -m kickserver` = the `kickserver` console script."""

import sys

from .cli import main

sys.exit(main())
