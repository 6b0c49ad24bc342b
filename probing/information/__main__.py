"""``python -m probing.information``: the command line of :mod:`probing.information.cli`."""

import sys

from probing.information.cli import main

sys.exit(main())
