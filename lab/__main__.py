"""``python -m lab``: list the lab's experiments or run one."""

import sys

from lab.cli import main

sys.exit(main())
