"""The rule on the new job's configuration: what the new Flink refuses, renamed or removed (`config_rules`)."""

from __future__ import annotations

from collections.abc import Iterator

from upgrade_gate.gate.config_rules import check_config
from upgrade_gate.gate.findings import ConfigChecked, Finding, Note, Refused
from upgrade_gate.gate.rules import RuleContext

__all__ = ["configuration"]


def configuration(ctx: RuleContext) -> Iterator[Finding]:
    """A setting Flink refuses stops the job before it restores (RESTORE_FAILS with Flink's error); the others are
    notes with their fix."""
    config = ctx.inputs.flink_config
    if config is None:
        return
    for f in check_config(config, ctx.inputs.options.flink_version):
        yield ConfigChecked(f)
        yield Refused(f.flink_error or f.text, "config") if f.blocking else Note(f"{f.text}; fix: {f.remedy}")
