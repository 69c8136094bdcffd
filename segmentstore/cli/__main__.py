"""``python -m segmentstore.cli``: the same command line as ``segmentstore``."""

import sys

from segmentstore.cli import main

sys.exit(main())
