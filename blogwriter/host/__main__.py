"""``python -m blogwriter.host``: the local host without going through the CLI."""

import sys

from . import main

sys.exit(main(sys.argv[1:]))
