"""Sub-commands of `upgrade-gate`, one module each, listed in help order.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`; a new command
is a new module added to `COMMANDS`.
"""

from upgrade_gate.cli.commands import check, export, ids, inspect, mapping, repair

COMMANDS = (ids, inspect, mapping, check, repair, export)

__all__ = ["COMMANDS"]
