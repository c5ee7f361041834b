"""Delivery: the `upgrade-gate` console script, its commands, terminal tables and the HTML report."""
