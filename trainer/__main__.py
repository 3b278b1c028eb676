"""`python -m trainer ...` is `kicktrain ...` (torchrun launches it this way: `torchrun ... -m trainer fit ...`)."""

import sys

from .cli import main

sys.exit(main())
