"""``python -m fastrl.eval``: see :mod:`fastrl.eval.cli`."""

import sys

from fastrl.eval.cli import main

sys.exit(main())
