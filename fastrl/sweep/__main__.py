"""``python -m fastrl.sweep``: Optuna sweeps (fastrl.sweep.cli); one line naming the extra to
install when Optuna is not there."""

import sys

try:
    import optuna  # noqa: F401 - only whether it is there
except ImportError:
    print("fastrl.sweep: error: sweeps need Optuna, the 'sweep' extra: "
          "pip install -c constraints.txt -e \".[sweep]\"", file=sys.stderr)
    sys.exit(2)

from fastrl.sweep.cli import main

sys.exit(main())
