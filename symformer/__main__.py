"""``python -m symformer``."""

import sys

from symformer.cli import main

sys.exit(main())
