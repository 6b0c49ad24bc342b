"""``python -m probing.data``: the command line of :mod:`probing.data.cli`."""

import sys

from probing.data.cli import main

sys.exit(main())
