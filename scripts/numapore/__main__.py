"""python -m numapore: the numapore console command."""

import sys

from numapore.cli import main

sys.exit(main())
