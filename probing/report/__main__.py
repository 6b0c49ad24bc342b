"""``python -m probing.report``: the command line of :mod:`probing.report.cli`."""

import sys

from probing.report.cli import main

sys.exit(main())
