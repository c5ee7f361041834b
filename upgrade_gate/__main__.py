"""`python -m upgrade_gate` is the `upgrade-gate` console script."""

from upgrade_gate.cli.main import main

raise SystemExit(main())
