"""``python -m ciq_optuna.cli`` runs the ciq-optuna command."""

import sys

from ciq_optuna.cli import main

# Guarded: the fork server that isolates compiles imports ``__main__`` again in its children.
if __name__ == "__main__":
    sys.exit(main())
