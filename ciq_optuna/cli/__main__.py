"""``python -m ciq_optuna.cli`` runs the ciq-optuna command."""

import sys

from ciq_optuna.cli import main

sys.exit(main())
