"""Rendering of what the gate found, for every front end (the `upgrade-gate` CLI and the Airflow plugin, whose
views and fleet scan publish the same pages): the HTML report and fleet page (`html`, `fleet`, built from
`picture`, `charts`, `sections`, `states` and `colours`), a check as text (`check_table`), the terminal
tables and sizes they share (`text_table`, `sizes`), and a check for a pull request, from its JSON (`risks`: the
findings with stable rule ids and the summary line; `markdown`, `github`, `junit`, `sarif`).

Renderers get what they show as arguments and read nothing themselves: no savepoint, state file or graph is
opened here (tests/test_architecture.py keeps `upgrade_gate.storage` and `upgrade_gate.cli` out)."""

__all__ = ["charts", "check_table", "colours", "fleet", "github", "html", "junit", "markdown", "picture", "risks",
           "sarif", "sections", "sizes", "states", "text_table"]
