"""Sub-commands of `upgrade-gate`, one module each, listed in help order.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`; a new command is a new
module named in `COMMANDS`. Modules are imported by name, and `upgrade-gate check` imports only `check`:
importing every command (the exporter's subprocess and archive modules, the repair engine, Rich for tables)
was most of a `check`'s CPU time (docs/performance.md, "A check's own cost").
"""

from __future__ import annotations

import importlib
from types import ModuleType

COMMANDS = ("ids", "inspect", "mapping", "check", "apply", "lint", "repair", "export")


def load(name: str) -> ModuleType:
    """The command module called `name` (one of `COMMANDS`)."""
    return importlib.import_module(f"upgrade_gate.cli.commands.{name}")


__all__ = ["COMMANDS", "load"]
