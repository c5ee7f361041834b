"""`upgrade-gate apply --deployment NEW.yaml --live kube://NS/KIND/NAME`: gate a spec against the live resource,
and patch it only when the gate passes.

The live resource is read once (`upgrade_gate.storage.k8s_live`): its status gives the savepoint, its spec the
running Flink version; NEW's spec is gated by `check.check_job`, the path of `check --deployment NEW --current
CURRENT`, so the verdict, the report and its formats are the same. Only if the gate passes is the live spec patched
to NEW's, as a JSON merge patch carrying the resourceVersion of that one read: the operator sees a spec change and
runs its upgrade (`spec.job.upgradeMode`), and a resource changed after the gate read it is refused by the API
server (409), never overwritten (docs/guide.md, "Gate and apply against the live API").

Exit codes: 0 the gate passed and the spec was patched (or, with `--dry-run`, the server accepted the patch and
stored nothing), 1 the gate blocks and nothing was sent, 2 bad input or the patch was refused (a 409 among them):
one line naming the resource, nothing changed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from hashing.errors import InputError
from upgrade_gate.cli.commands import check as check_command
from upgrade_gate.storage import k8s_live, k8s_operator
from upgrade_gate.storage.redact import one_line

NAME = "apply"
HELP = ("gate a FlinkDeployment/FlinkSessionJob spec against the live resource (its savepoint, Flink version, "
        "upgrade mode) and patch the live spec only if the gate passes, with the resourceVersion it read")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--deployment", required=True, metavar="NEW.yaml",
                        help="the new resource (what `kubectl apply -f` would send): its spec is gated, then patched")
    parser.add_argument("--live", required=True, metavar="kube://[CONTEXT@]NAMESPACE/KIND/NAME",
                        help=f"the live resource: {k8s_live.SYNTAX}; the kubeconfig ($KUBECONFIG, ~/.kube/config) "
                             f"or, inside a pod, the service account")
    parser.add_argument("--graph", default=None,
                        help="the new job's graph spec (JSON/YAML) or execution plan (default: exported from the "
                             "spec's jar, or --jar)")
    check_command.add_jar_argument(parser)
    parser.add_argument("--dry-run", action="store_true",
                        help="gate, then send the patch with dryRun=All: the API server (and the operator's webhook) "
                             "validates it and stores nothing")
    check_command.add_gate_options(parser)


def new_spec(deployment: str, ref: k8s_live.LiveRef) -> dict[str, Any]:
    """NEW's spec as written, after checking that NEW is the live resource's kind and name."""
    jobs = [i for i in k8s_operator.load_items(deployment)
            if isinstance(i, dict) and i.get("kind") in k8s_operator.JOB_KINDS]
    meta = [i.get("metadata") if isinstance(i.get("metadata"), dict) else {} for i in jobs]
    same = [j for j, m in zip(jobs, meta, strict=True)
            if j.get("kind") == ref.kind and m.get("name") == ref.name and m.get("namespace") in (None, ref.namespace)]
    if len(same) != 1:
        held = ", ".join(f"{one_line(j.get('kind'), 40)}/{one_line(m.get('name'), 80)}"
                         for j, m in zip(jobs, meta, strict=True)) or "no operator job resource"
        raise InputError(f"{deployment}: must hold exactly one {ref.kind} named {ref.name!r} (namespace "
                         f"{ref.namespace!r}) to apply to {ref}; it holds {held}")
    spec = same[0].get("spec")
    if not isinstance(spec, dict) or not spec:
        raise InputError(f"{deployment}: {ref.kind}/{ref.name} has no spec to apply")
    return spec


def run(args: argparse.Namespace) -> int:
    args.format = args.format or check_command.default_format()
    ref = k8s_live.parse_ref(args.live)
    spec = new_spec(args.deployment, ref)  # bad input first, before any request
    live = k8s_live.read_live(ref)
    args.manifest, args.savepoint, args.current = None, None, str(ref)
    job = check_command.check_job(args, current=live.resources)
    check_command.write_output(check_command.render(args.format, job, annotated=args.graph or args.deployment), args)
    if not job.decision.passes:
        print(f"apply: {ref} not patched: the gate blocks ({job.decision.line})", file=sys.stderr)
        return 1
    patched = k8s_live.patch_spec(live, spec, dry_run=args.dry_run)
    lines = k8s_live.patch_lines(patched.patch, live.resource.get("spec"))
    if not lines:
        head = f"apply: {ref}: the live spec already is NEW's; nothing sent"
    elif args.dry_run:
        head = f"apply: dry run: the API server accepted this patch of {ref} and stored nothing"
    else:
        head = (f"apply: patched {ref} (resourceVersion {live.resource_version} -> "
                f"{patched.resource_version or '?'}; JSON merge patch of spec)")
    print("\n".join([head, *(f"  {line}" for line in lines)]), file=sys.stderr)
    return 0
