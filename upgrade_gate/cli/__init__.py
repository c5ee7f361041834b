"""Delivery: the `upgrade-gate` console script and its commands (argument parsing and wiring; what they print is
rendered by `upgrade_gate.report`)."""

__all__ = ["commands", "main"]
