"""Sub-commands of `upgrade-gate`, one module each.

Each module defines `NAME`, `HELP`, `add_arguments(parser)` and `run(args) -> int`; the CLI
discovers them, so adding a command never touches the dispatcher.
"""
