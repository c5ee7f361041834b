"""Delivery: the `upgrade-gate` console script, its commands, terminal tables and the HTML report."""

__all__ = ["commands", "main", "report_html", "text_table"]
