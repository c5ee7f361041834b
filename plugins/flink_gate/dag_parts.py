"""What the gate DAGs share, built once: the check settings of the trigger form and the notifiers.

The `Param` enums come from `upgrade_gate.vocabulary`, the same lists the CLI's `choices` and the
Spark jobs' flags use, so a form can never offer a hasher, matching mode or Flink version that the
core refuses. The notifier list is the one place that says which Airflow Variables name the alert
connections (docs/guide.md, "Airflow").
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from flink_gate.notifications import GateEmailNotifier, GateSlackWebhookNotifier, GateWebhookNotifier
from flink_gate.notifications.base import GateNotifier
from upgrade_gate.vocabulary import (
    DEFAULT_FLINK_VERSION,
    DEFAULT_HASHER,
    DEFAULT_MATCHING,
    FLINK_VERSIONS,
    HASHERS,
    MATCHING_MODES,
)

__all__ = ["ADVANCED", "CHECK", "UPGRADE", "check_params", "deferrable_param", "flip411_params", "in_section",
           "job_settings_params", "notifiers", "storage_param", "waivers_param"]

# The trigger form's sections (`Param(section=...)`, one accordion each in Airflow 3's form): what to
# judge, and what to do after a SAFE verdict. A check-only run never needs to open the second one.
CHECK = "Check: which upgrade to judge"
UPGRADE = "Upgrade: performed only after a SAFE verdict (mode = upgrade)"
# FLIP-411's knobs: their defaults are what Flink does today, so a first run never needs to open this section
ADVANCED = "Advanced: FLIP-411 hasher and matching (the defaults are Flink's own behaviour)"


def in_section(section: str, params: dict[str, Param]) -> dict[str, Param]:
    """The same params, each shown in the form's `section` (unless it already names one)."""
    for param in params.values():
        param.schema.setdefault("section", section)
    return params


def check_params(*, section: str | None = None, flip411: bool = True) -> dict[str, Param]:
    """The settings every check takes: allowNonRestoredState, Flink version, and (unless `flip411=False`, for a
    DAG that shows them last with `flip411_params`) hasher and matching."""
    extra: dict[str, Any] = {"section": section} if section else {}
    return {
        **(flip411_params(section=section) if flip411 else {}),
        "allow_non_restored_state": Param(False, type="boolean", title="allowNonRestoredState",
                                          description="Let Flink start even if some state has no operator. The gate "
                                          "then reports STATE_LOSS instead of RESTORE_FAILS; it still blocks.",
                                          **extra),
        "flink_version": Param(DEFAULT_FLINK_VERSION, type="string", enum=list(FLINK_VERSIONS),
                               title="Flink version of the new job", **extra),
    }


def flip411_params(*, section: str | None = ADVANCED) -> dict[str, Param]:
    """Hasher and alternative-id matching: FLIP-411's knobs; the defaults are what Flink does today."""
    extra: dict[str, Any] = {"section": section} if section else {}
    return {
        "hasher": Param(DEFAULT_HASHER, type="string", enum=list(HASHERS), title="Hasher",
                        description=f"v2: Flink's StreamGraphHasherV2 (Flink {FLINK_VERSIONS[0]}–{FLINK_VERSIONS[-1]} "
                        "today). v3: FLIP-411's chaining-agnostic hasher, with V2 ids as fallbacks.", **extra),
        "matching": Param(DEFAULT_MATCHING, type="string", enum=list(MATCHING_MODES), title="Alternative-ID matching",
                          description="fixed: ordered alternative ids (FLIP-411 as intended). naive: today's loop, "
                          "which shows the state loss the FLIP describes.", **extra),
    }


def job_settings_params(*, section: str | None = None) -> dict[str, Param]:
    """What `flink run` is given beside the jar: `-p`, `-D` pairs and the client's config file.

    The same three reach every place that needs them, so the job that is gated is the job that runs: the jar
    export builds the graph with them (uid-less operators' IDs depend on chaining, chaining on these settings),
    the check judges the configuration (`upgrade_gate.gate.config_rules`) and rescales against the parallelism,
    and an upgrade starts the new job with the parallelism and the `-D` pairs (Flink REST `flinkConfiguration`)."""
    extra: dict[str, Any] = {"section": section} if section else {}
    return {
        "parallelism": Param(0, type="integer", minimum=0, maximum=32768, title="Job parallelism (-p)",
                             description="As `flink run -p`: the jar export builds the graph with it, the check "
                             "rescales the savepoint to it, an upgrade starts the new job with it. 0: not given "
                             "(the config's parallelism.default, else 1; the report says when uid-less operators' "
                             "IDs depend on it).", **extra),
        "flink_settings": Param([], type="array", items={"type": "string"}, title="Flink settings (-D)",
                                description="key=value, one per line, as `flink run -D` (e.g. "
                                "pipeline.operator-chaining.enabled=false): used by the jar export, checked against "
                                "what the new Flink refuses, and given to the new job when upgrading.", **extra),
        "flink_config": Param(None, type=["null", "string"], title="Flink config file",
                              description="The client's config.yaml (or 1.x flink-conf.yaml): path or URI. The jar "
                              "export reads it as `flink run` does; the check flags what the new Flink refuses or "
                              "removed.", **extra),
    }


def waivers_param(*, section: str | None = None) -> Param:
    """The repository's `.upgrade-gate.yaml` (intended losses and the threshold), read as the CLI reads it."""
    extra: dict[str, Any] = {"section": section} if section else {}
    return Param(None, type=["null", "string"], title="Waivers file",
                 description="The repository's .upgrade-gate.yaml (path or s3:// URI): losses the team intends, "
                 "each with a reason, an owner and an expiry, and the fail_on threshold, decided as "
                 "`upgrade-gate check --waivers` decides (docs/guide.md, \"Recording an intended loss\"). Only "
                 "STATE_LOSS can be waived; an expired waiver blocks again.", **extra)


def deferrable_param(what: str) -> Param:
    """Whether an upgrade's waits for Flink go to the triggerer (docs/guide.md, "Deferred waits"); `what` says, for
    the form, what the DAG does differently when they do."""
    return Param(False, type="boolean", title="Deferred waits (upgrade mode)",
                 description=f"{what}, waiting for Flink in the triggerer (no worker slot held while a savepoint "
                 "completes or a job restores). Needs a running triggerer.")


def storage_param(*, section: str | None = None) -> Param:
    extra: dict[str, Any] = {"section": section} if section else {}
    return Param("aws_default", type="string", title="Object storage connection",
                 description="The Airflow AWS connection for s3:// savepoints, graphs and upgrade records.", **extra)


def notifiers() -> list[GateNotifier]:
    """Webhook, Slack and e-mail, each enabled by its Airflow Variable / connection (unset: skipped)."""
    return [
        GateWebhookNotifier(http_conn_id="{{ var.value.get('upgrade_gate_webhook_conn_id', 'upgrade_gate_webhook') }}"),
        GateSlackWebhookNotifier(slack_webhook_conn_id="{{ var.value.get('upgrade_gate_slack_conn_id', '') }}"),
        GateEmailNotifier(to="{{ var.value.get('upgrade_gate_alert_email', '') }}",
                          smtp_conn_id="{{ var.value.get('upgrade_gate_smtp_conn_id', 'smtp_default') }}"),
    ]
