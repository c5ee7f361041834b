"""`upgrade-gate check --savepoint S --graph G`: the restore verdict, before anything is stopped."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from hashing.errors import InputError
from hashing.readers import LoadedGraph
from hashing.versions import FlinkVersion
from upgrade_gate.cli.commands.graph_args import graph_named, load_with_notes
from upgrade_gate.flink.metadata import CheckpointMetadata
from upgrade_gate.gate.check import CheckResult, check
from upgrade_gate.gate.flink_config import parse_settings
from upgrade_gate.gate.inputs import CheckOptions
from upgrade_gate.gate.policy import DEFAULT_FAIL_ON, FAIL_ON_LEVELS, GateDecision, decide
from upgrade_gate.gate.upgrade_modes import RestorePath, restore_path
from upgrade_gate.storage import discovery, k8s_live, k8s_operator
from upgrade_gate.storage.check_inputs import read_check_inputs, read_side
from upgrade_gate.storage.discovery import SYNTAX_HELP
from upgrade_gate.storage.redact import redact
from upgrade_gate.storage.savepoints import load_newest_complete
from upgrade_gate.storage.waivers import DEFAULT_FILE, GatePolicyFile, find_default, read_policy_file
from upgrade_gate.vocabulary import (
    DEFAULT_FLINK_VERSION,
    DEFAULT_HASHER,
    DEFAULT_MATCHING,
    FLINK_VERSIONS,
    HASHERS,
    MATCHING_MODES,
    Verdict,
)

NAME = "check"
FORMATS = ("table", "json", "html", "markdown", "github", "junit", "sarif")
# `check --format json`'s "schema_version": raised when a field is renamed or removed
# (docs/schemas/check-result.schema.json describes version 1)
SCHEMA_VERSION = "1"
HELP = (f"simulate restoring SAVEPOINT into the job GRAPH as Flink would: {', '.join(Verdict.mildest_first())}, "
        f"with the operators, state names and bytes at risk and the smallest fix")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--manifest", default=None, metavar="JOBS.yaml",
                        help="check many jobs: a manifest listing each job's graph and savepoint (or a directory "
                             "holding upgrade-gate.jobs.yaml); a summary table or JSON, exit code of the worst "
                             "verdict (docs/guide.md, \"In CI\")")
    parser.add_argument("--savepoint", default=None, help=SYNTAX_HELP)
    parser.add_argument("--graph", default=None,
                        help="the new job's graph spec (JSON/YAML) or execution plan (with --deployment: default "
                             "exported from the spec's jar, or --jar)")
    parser.add_argument("--deployment", default=None, metavar="NEW.yaml",
                        help="the new FlinkDeployment/FlinkSessionJob (Flink Kubernetes Operator) before kubectl "
                             "apply: its Flink version, parallelism, flinkConfiguration, args and "
                             "allowNonRestoredState are the new job's settings")
    parser.add_argument("--current", default=None, metavar="CURRENT.yaml",
                        help="the running resource as `kubectl get flinkdeployment NAME -o yaml` prints it, or read "
                             "from the live API as kube://[CONTEXT@]NAMESPACE/KIND/NAME: the savepoint its status "
                             "records is checked (same as --savepoint k8s:CURRENT.yaml)")
    add_jar_argument(parser)
    add_gate_options(parser)


def add_jar_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jar", default=None,
                        help="with --deployment and no --graph: the built job jar to export the graph from, when the "
                             "spec's jarURI is not a local file (local:// is inside the image)")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """The options of the judgement itself, shared with `upgrade-gate apply` (which names its sources otherwise)."""
    parser.add_argument("--old-graph", default=None,
                        help="the job graph that wrote the savepoint (spec, plan or exporter output): traces every "
                             "state to its writer to catch state restored into the wrong operator")
    parser.add_argument("--hasher", choices=HASHERS, default=DEFAULT_HASHER, help="v2 = Flink's; v3 = FLIP-411")
    parser.add_argument("--matching", choices=MATCHING_MODES, default=DEFAULT_MATCHING,
                        help="V3 alternative-id matching: fixed (ordered list) or naive (one pair per legacy hasher)")
    parser.add_argument("--allow-non-restored-state", action="store_true", help="as Flink's --allowNonRestoredState")
    parser.add_argument("--flink-version", default=None, metavar="X.Y",
                        help=f"Flink version that will run the new job ({', '.join(FLINK_VERSIONS)}; "
                             f"default {DEFAULT_FLINK_VERSION})")
    parser.add_argument("--new-job-savepoint", default=None, metavar="NEW",
                        help="a savepoint (or _metadata) the NEW job version wrote, e.g. in staging: every state's "
                             "serializers are diffed against --savepoint's, and changes Flink cannot migrate fail")
    parser.add_argument("--old-savepoint", default=None, metavar="OLD",
                        help="a savepoint the job wrote BEFORE its change: its state schemas are the baseline and "
                             "--savepoint's the candidate (would OLD still restore into the job that wrote it?)")
    parser.add_argument("--flink-config", default=None, metavar="FILE",
                        help="the new job's config.yaml or legacy flink-conf.yaml (or their directory): checked "
                             "against what Flink 2.x removed or renamed")
    parser.add_argument("-D", dest="dynamic", action="append", default=[], metavar="KEY=VALUE",
                        help="a Flink setting the new job gets, as `flink run -D` (repeatable); checked like "
                             "--flink-config")
    parser.add_argument("--fail-on", choices=[str(v) for v in FAIL_ON_LEVELS], default=None, metavar="LEVEL",
                        help="exit 1 only when the verdict left after the waivers is at least LEVEL "
                             f"({', '.join(FAIL_ON_LEVELS)}; default: the waivers file's fail_on, else "
                             f"{DEFAULT_FAIL_ON}: any non-SAFE verdict blocks)")
    parser.add_argument("--waivers", default=None, metavar="FILE",
                        help=f"intended losses and the threshold (docs/guide.md, \"Recording an intended loss\"; "
                             f"default: {DEFAULT_FILE} in the current directory, if there is one)")
    parser.add_argument("--no-waivers", action="store_true", help=f"ignore {DEFAULT_FILE} and every waiver")
    parser.add_argument("--job", default=None, metavar="NAME",
                        help="the job's name: waivers that name a `job:` apply only to that job")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="table (default; github when GITHUB_ACTIONS=true), json, html, or for a pull request: "
                             "markdown (a comment), github (workflow annotations; appends markdown to "
                             "$GITHUB_STEP_SUMMARY), junit (JUnit XML), sarif (SARIF 2.1.0, code scanning)")
    parser.add_argument("--output", "-o", default=None, help="write the report to this file instead of stdout")


def repair_offer(res: CheckResult, savepoint: CheckpointMetadata, graph: Any, old: Any, args: argparse.Namespace,
                 flink_version: str | None) -> dict[str, Any] | None:
    """Would `upgrade-gate repair` make this upgrade SAFE without changing the job (docs/guide.md, "When the gate
    says no")? `upgrade_gate.repair.offer`, with the command spelled with this invocation's names."""
    from upgrade_gate.repair.offer import repair_offer as offer
    from upgrade_gate.storage.state_files import state_stream_opener

    return offer(res, savepoint, read_side(graph), old=read_side(old) if old is not None else None,
                 hasher=args.hasher, matching=args.matching, flink_version=flink_version,
                 opener=state_stream_opener(), graph=args.graph or "GRAPH", old_graph=args.old_graph,
                 savepoint=redact(args.savepoint or (args.current if k8s_live.is_live(args.current)
                                                     else f"{discovery.K8S}{args.current}")))


def _report_states(res: CheckResult) -> dict[str, list[dict[str, Any]]] | None:
    """The HTML report's State section: every operator's states, read from the savepoint's state files. None when
    they cannot be read: the report must still be written (the check itself ran on the metadata), and then lists
    only the states the gate flags."""
    from upgrade_gate.report.states import state_map
    from upgrade_gate.storage.state_files import read_savepoint_states

    if not res.savepoint:
        return None
    try:
        return state_map(read_savepoint_states(res.savepoint))
    except Exception:
        return None


def _coloured(text: str) -> str:
    """The verdict line in colour on a terminal (green SAFE, yellow a SAFE that compared less, red otherwise); never
    in a file, a pipe or with NO_COLOR (no-color.org) set."""
    if os.environ.get("NO_COLOR") or not sys.stdout.isatty() or os.environ.get("TERM") == "dumb":
        return text
    first, sep, rest = text.partition("\n")
    safe = f"VERDICT: {Verdict.SAFE}"
    colour = "32" if first == safe else "33" if first.startswith(f"{safe} (") else "31"
    return f"\033[1;{colour}m{first}\033[0m{sep}{rest}"


def _savepoint(args: argparse.Namespace, current: k8s_operator.Resources | None) -> Any:
    """What to check against: a location as given (read by the core), or a discovery form resolved first
    and named on stderr, so the user sees which snapshot was chosen before the verdict."""
    if args.savepoint and args.current:
        raise InputError("give --savepoint or --current, not both (--current FILE is --savepoint k8s:FILE)")
    if current is not None:  # the resource read once (file or live API): its status's savepoint
        return _announced(*discovery.load_found(discovery.k8s_found(current)))
    if not args.savepoint:
        raise InputError("--savepoint is required (or --current with a Kubernetes operator resource)")
    return resolve_savepoint(args.savepoint)


def current_resources(args: argparse.Namespace) -> k8s_operator.Resources | None:
    """`--current`: a `kubectl get -o yaml` file, or the live resource (`kube://`), read once for the savepoint and
    the running Flink version alike."""
    if not args.current:
        return None
    if k8s_live.is_live(args.current):
        return k8s_live.read_live(k8s_live.parse_ref(args.current)).resources
    return k8s_operator.load_resources(args.current)


def resolve_savepoint(spec: str) -> Any:
    """A location as given (read by the core), or a discovery form (`latest:`, `flink-rest://`, `k8s:`)
    resolved first and named on stderr, so the user sees which snapshot was chosen."""
    if not discovery.is_discovery(spec):
        return spec
    return _announced(*discovery.load(spec))


def _announced(metadata: CheckpointMetadata, found: discovery.Found) -> CheckpointMetadata:
    """The savepoint read, after saying on stderr which one it is and why."""
    print(f"savepoint: {metadata.source} ({found.how})", file=sys.stderr)
    for warning in found.warnings():
        print(f"warning: {warning}", file=sys.stderr)
    return metadata


def read_savepoint(spec: str) -> Any:
    """The parsed newest complete snapshot `spec` names; a newer incomplete one skipped is named on stderr."""
    loaded = load_newest_complete(spec)
    for skipped in loaded.skipped:
        print(f"warning: {skipped}; read {loaded.source}", file=sys.stderr)
    return loaded.metadata


def gate_policy(args: argparse.Namespace) -> tuple[Verdict, GatePolicyFile | None]:
    """The threshold and the waivers file this run decides with: `--waivers`, else `.upgrade-gate.yaml` in the
    current directory; `--fail-on` wins over the file's `fail_on`. Read before the savepoint, so a bad file fails
    first."""
    if args.no_waivers and args.waivers:
        raise InputError("give --waivers FILE or --no-waivers, not both")
    location = None if args.no_waivers else args.waivers or find_default()
    policy_file = read_policy_file(location) if location else None
    fail_on = args.fail_on or (policy_file.fail_on if policy_file else None) or DEFAULT_FAIL_ON
    return Verdict(fail_on), policy_file


def _restore_path(current_res: k8s_operator.Resources | None,
                  settings: k8s_operator.JobSettings | None) -> RestorePath:
    """With --deployment, the operator's upgradeMode decides how the new job gets its state (`gate.upgrade_modes`);
    HA metadata is not used across a Flink version change, which --current tells."""
    if settings is None:
        return RestorePath.SAVEPOINT  # `flink run -s`
    current = k8s_operator.job_settings(current_res).flink_version if current_res is not None else None
    changed = current is not None and settings.flink_version is not None and current != settings.flink_version
    return restore_path(settings.upgrade_mode, session_job=settings.session_job, flink_version_changed=changed,
                        blue_green=settings.blue_green)


@dataclass(frozen=True)
class JobCheck:
    """One job checked: the result, the repair offer and the graphs as read (the HTML report draws them)."""

    result: CheckResult
    offer: dict[str, Any] | None
    graph: LoadedGraph
    old: LoadedGraph | None
    decision: GateDecision  # the waivers and --fail-on applied (`gate.policy.decide`): the exit code

    def to_json(self) -> dict[str, Any]:
        """The `check --format json` document (docs/design.md, Contracts)."""
        return {"schema_version": SCHEMA_VERSION, **self.result.to_json(), "repair": self.offer,
                "gate": self.decision.to_json()}


def check_job(args: argparse.Namespace, current: k8s_operator.Resources | None = None) -> JobCheck:
    """Read what `args` names and check it: the one path of a single check, of each job of a manifest
    (`upgrade_gate/cli/commands/check_manifest.py`) and of `upgrade-gate apply`, which passes the live resource it
    read (`current`) so the resource gated is the resource patched."""
    fail_on, policy_file = gate_policy(args)  # read before the savepoint, so a bad file fails first
    settings = (k8s_operator.job_settings(k8s_operator.load_resources(args.deployment))
                if args.deployment else None)
    if settings is None and (args.jar or not args.graph):
        raise InputError("--graph is required (or --deployment NEW.yaml, whose jar is exported)" if not args.jar
                         else "--jar needs --deployment (export a jar yourself with `upgrade-gate export`)")
    jar = None
    if settings is not None and not args.graph:  # exported from the spec's jar (its module only for this case)
        from upgrade_gate.cli.commands.deployment import export_for_deployment, local_jar

        jar = local_jar(args.deployment, settings, args.jar)  # fail early
    if current is None and not (args.savepoint and args.current):
        current = current_resources(args)
    savepoint = _savepoint(args, current)
    if isinstance(savepoint, str):  # read once: the check and the repair offer share it
        savepoint = read_savepoint(savepoint)
    if jar is None:
        graph = load_with_notes(args.graph)  # read once: the check gets every field, descriptive ones included
    else:
        assert settings is not None
        graph = export_for_deployment(args.deployment, settings, jar)
    old = load_with_notes(args.old_graph) if args.old_graph else None
    flink_version = args.flink_version or (settings.flink_version if settings else None)
    allow = args.allow_non_restored_state or bool(settings and settings.allow_non_restored_state)
    options = CheckOptions(args.hasher, args.matching, FlinkVersion.parse(flink_version), allow,
                           restore_path=_restore_path(current, settings))
    with graph_named(args.graph or args.deployment):
        res = check(read_check_inputs(
            savepoint, graph, options=options, old_graph=old, old_savepoint=args.old_savepoint,
            new_job_savepoint=args.new_job_savepoint, flink_config=args.flink_config,
            # the resource's flinkConfiguration is the new job's configuration; -D overrides it
            settings=(*(settings.flink_configuration.items() if settings else ()), *parse_settings(args.dynamic))))
    decision = decide(res.to_json(), waivers=policy_file.waivers if policy_file else (), fail_on=fail_on,
                      job=args.job)
    return JobCheck(res, repair_offer(res, savepoint, graph, old, args, flink_version), graph, old, decision)


def write_output(text: str, args: argparse.Namespace) -> None:
    """To `--output`, or stdout (a table's verdict line coloured on a terminal)."""
    if args.output:
        _write(args.output, text, "w")
    else:
        sys.stdout.write(_coloured(text) if args.format == "table" else text)


def run(args: argparse.Namespace) -> int:
    if args.manifest:  # many jobs: its own module, loaded only then
        from upgrade_gate.cli.commands.check_manifest import SingleCheck, run_manifest

        args.format = args.format or "table"  # a summary of many jobs, also inside GitHub Actions
        return run_manifest(args, SingleCheck(add_arguments, check_job, write_output))
    args.format = args.format or default_format()
    job = check_job(args)
    offer = job.offer
    write_output(render(args.format, job, annotated=args.graph or args.deployment), args)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if args.format == "github" and summary:  # the job's summary page: the comment a reviewer would read
        from upgrade_gate.report.markdown import render_markdown
        _write(summary, render_markdown(job.to_json(), offer), "a")
    return 0 if job.decision.passes else 1


def default_format() -> str:
    """github inside GitHub Actions (which sets GITHUB_ACTIONS=true in every step), else the terminal table."""
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "table"


def render(fmt: str, job: JobCheck, annotated: str) -> str:
    """The report in `fmt`. Each renderer's module (and its library) is imported only for its format:
    Jinja2 for HTML, Rich for a table, junitparser for JUnit (tests/cli/test_check_imports.py)."""
    res, offer, graph, old = job.result, job.offer, job.graph, job.old
    doc = job.to_json()
    if fmt == "json":
        return json.dumps(doc, indent=2) + "\n"
    if fmt == "html":
        from upgrade_gate.report.html import render_html
        return render_html({**res.to_json(), "gate": doc["gate"]}, new_graph=graph, old_graph=old,
                           states=_report_states(res), repair=offer)
    if fmt == "markdown":
        from upgrade_gate.report.markdown import render_markdown
        return render_markdown(doc, offer)
    if fmt == "github":
        from upgrade_gate.report.github import render_github
        return render_github(doc, annotated)
    if fmt == "junit":
        from upgrade_gate.report.junit import render_junit
        return render_junit(doc)
    if fmt == "sarif":
        from upgrade_gate.report.sarif import render_sarif
        return json.dumps(render_sarif(doc, annotated), indent=2) + "\n"
    from upgrade_gate.report.check_table import render_table
    from upgrade_gate.report.text_table import paragraph
    verdict, _, rest = render_table(res, offer).partition("\n")
    return f"{verdict}\n{paragraph(f'GATE: {job.decision.line}')}\n{rest}"


def _write(path: str, text: str, mode: str) -> None:
    """Write (`w`) or append (`a`) a report; a path that cannot be written is bad input (exit 2), named."""
    try:
        with open(path, mode, encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the report: {exc.strerror or exc}") from None
