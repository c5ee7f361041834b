"""The `upgrade-gate` console script.

Exit codes are a contract (docs/design.md, Contracts): 0 ok / SAFE, 1 the verdict is not SAFE, 2 bad input.
Bad input is reported as one line naming the file and the problem, never as a traceback.
"""

from __future__ import annotations

import argparse
import sys

from hashing.errors import InputError
from upgrade_gate.cli.commands import COMMANDS, load

EXIT_OK, EXIT_UNSAFE, EXIT_BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would exit 2 with usage; keep that, it is bad input
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"upgrade-gate: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (`command`) one whose other sub-commands are names only: their modules, and what
    they import, are never loaded for a run of another command."""
    parser = _Parser(prog="upgrade-gate",
                     description="Will this Flink upgrade restore every byte of state? Operator IDs, "
                                 "savepoint metadata and restore simulation, bit-exact with Flink.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        if command is not None and name != command:
            sub.add_parser(name)
            continue
        mod = load(name)
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The sub-command named on the command line (the first word), if it is one; else None (`--help`, a typo:
    the whole parser answers)."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(_command_in(argv)).parse_args(argv)
    try:
        return int(args._run(args))
    except InputError as exc:
        print(f"upgrade-gate: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
